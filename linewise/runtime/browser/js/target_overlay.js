// The step-through debugger's box around the element the next action targets, or its
// removal (box null). Evaluated in the top frame with the box in viewport pixels.
//
// The box must never reach the model. The runtime removes it before every observation
// and every action; on top of that it lives in a closed shadow root (the page's scripts
// and the marking script cannot reach into it) of an aria-hidden host (left out of the
// accessibility tree) that takes no pointer events (a click goes through to the page).
({ box, label, color }) => {
  const HOST_ATTRIBUTE = "data-linewise-overlay";
  for (const old of document.querySelectorAll(`[${HOST_ATTRIBUTE}]`)) {
    old.remove();
  }
  if (box === null) {
    return false;
  }
  const host = document.createElement("div");
  host.setAttribute(HOST_ATTRIBUTE, "");
  host.setAttribute("aria-hidden", "true");
  host.style.cssText =
    "all: initial; position: fixed; left: 0; top: 0; width: 0; height: 0; " +
    "pointer-events: none; z-index: 2147483647;";
  const root = host.attachShadow({ mode: "closed" });
  const frame = document.createElement("div");
  frame.style.cssText =
    `position: fixed; box-sizing: border-box; pointer-events: none; ` +
    `left: ${box.x - 3}px; top: ${box.y - 3}px; ` +
    `width: ${box.width + 6}px; height: ${box.height + 6}px; ` +
    `border: 3px solid ${color};`;
  const tag = document.createElement("div");
  tag.textContent = label;
  tag.style.cssText =
    `position: fixed; pointer-events: none; left: ${box.x - 3}px; ` +
    `top: ${Math.max(0, box.y - 24)}px; padding: 1px 6px; ` +
    `font: 12px/18px monospace; color: #fff; background: ${color}; white-space: pre;`;
  root.append(frame, tag);
  (document.body || document.documentElement).append(host);
  return true;
};
