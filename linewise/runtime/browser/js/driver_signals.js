// Loaded into Playwright's driver (its node process) by linewise, through NODE_OPTIONS
// (runtime/browser/driver.py).
//
// SIGTERM sent to linewise's process group (`timeout`, CI runners), and the SIGHUP of a
// closed terminal, reach the driver too. With no listener node exits at once, and
// Chromium is lost under the running episode, which then ends on a browser fault
// instead of stopping. linewise handles both itself: it stops its episodes, closes
// Chromium, then closes the driver's pipe, which ends the driver (as Playwright's own
// driver does for SIGINT). Should linewise be killed instead, the pipe closes all the
// same and the driver still closes Chromium.
process.on('SIGTERM', () => {});
process.on('SIGHUP', () => {});
