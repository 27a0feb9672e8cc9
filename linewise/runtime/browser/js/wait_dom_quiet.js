/**
 * Resolve once the DOM has had no mutation for `quietMs` milliseconds, or after
 * `maxMs` at the latest. Returns the milliseconds waited. Used after an action so
 * that the observation sees the page's reaction (menus, validation messages,
 * autocomplete) without a fixed sleep.
 */
([quietMs, maxMs]) => new Promise((resolve) => {
    const start = performance.now();
    let timer = null;
    const done = () => {
        observer.disconnect();
        clearTimeout(timer);
        clearTimeout(cap);
        resolve(Math.round(performance.now() - start));
    };
    const observer = new MutationObserver(() => {
        clearTimeout(timer);
        timer = setTimeout(done, quietMs);
    });
    observer.observe(document, {
        subtree: true, childList: true, attributes: true, characterData: true,
    });
    timer = setTimeout(done, quietMs);
    const cap = setTimeout(done, maxMs);
})
