/**
 * Render what `content-visibility: auto` skips, so that it is in the accessibility tree.
 *
 * Chromium leaves the content of an off-screen `content-visibility: auto` box out of the
 * accessibility tree until it is scrolled near: a documentation page that sets it on
 * every section (Node.js's API pages) shows its first section only. A person sees the
 * rest by scrolling, so the agent must read it too. The rules that set `auto` are found
 * in the document's own style sheets (a cross-origin sheet cannot be read and is
 * skipped) and in inline styles, and overridden with `visible` in one adopted style
 * sheet (no node is added to the page). `content-visibility: hidden` is left alone: that
 * content is hidden from people too.
 *
 * Returns how many selectors and inline styles were overridden.
 */
() => {
    const selectors = new Set();
    const walk = (rules) => {
        for (const rule of rules) {
            if (rule.cssRules && rule.cssRules.length && !rule.style) {
                walk(rule.cssRules);  // @media, @supports, @layer
            } else if (rule.style && rule.selectorText
                       && rule.style.getPropertyValue("content-visibility").trim() === "auto") {
                selectors.add(rule.selectorText);
            }
        }
    };
    for (const sheet of [...document.styleSheets, ...document.adoptedStyleSheets]) {
        let rules;
        try {
            rules = sheet.cssRules;
        } catch (error) {
            continue;  // a cross-origin sheet
        }
        if (sheet.__linewiseOverride) {
            continue;
        }
        walk(rules);
    }
    let inline = 0;
    for (const element of document.querySelectorAll("[style*='content-visibility']")) {
        if (element.style.getPropertyValue("content-visibility").trim() === "auto") {
            element.style.setProperty("content-visibility", "visible", "important");
            inline += 1;
        }
    }
    const known = document.__linewiseSkippedSelectors || "";
    const wanted = [...selectors].sort().join(",\n");
    if (wanted && wanted !== known) {
        const sheet = new CSSStyleSheet();
        sheet.replaceSync(`${wanted} { content-visibility: visible !important; }`);
        sheet.__linewiseOverride = true;
        document.adoptedStyleSheets = [
            ...document.adoptedStyleSheets.filter((s) => !s.__linewiseOverride), sheet,
        ];
        document.__linewiseSkippedSelectors = wanted;
    }
    return selectors.size + inline;
}
