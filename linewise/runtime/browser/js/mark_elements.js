/**
 * Marks every element of this frame (shadow roots included) with a bid under the
 * episode's private `attribute` and stores the bid in the ARIA properties the AXTree
 * reads: BrowserGym's frame_mark_elements.js (browsergym-core 0.14), changed so that
 * nothing the page writes decides an element's id.
 *
 * The marking's memory is the object it returns (`state`), which linewise keeps as a
 * handle and passes back at the next marking of the same document; no page global
 * holds or reaches it. An element keeps its bid only if `previous` recorded it under
 * that very bid: an element a page planted or copied the attribute onto (it learned the
 * name by watching the marking) gets a fresh bid, whatever its value, and a page that
 * deletes or rewrites globals cannot make the marking refuse the page (BrowserGym's
 * "Attribute … already used" ended the episode). `state.elements` is the record actions
 * resolve a bid through: the element marked under it, in this document.
 *
 * Only plain property reads and writes touch `state`: no method of the page's (which it
 * may have replaced) ever sees it.
 */
async ([parentBid, attribute, previous]) => {
    const htmlTags = new Set([
        "a", "abbr", "acronym", "address", "applet", "area", "article", "aside", "audio",
        "b", "base", "basefont", "bdi", "bdo", "big", "blockquote", "body", "br", "button",
        "canvas", "caption", "center", "cite", "code", "col", "colgroup", "data", "datalist",
        "dd", "del", "details", "dfn", "dialog", "dir", "div", "dl", "dt", "em", "embed",
        "fieldset", "figcaption", "figure", "font", "footer", "form", "frame", "frameset",
        "h1", "h2", "h3", "h4", "h5", "h6", "head", "header", "hgroup", "hr", "html", "i",
        "iframe", "img", "input", "ins", "kbd", "label", "legend", "li", "link", "main",
        "map", "mark", "menu", "meta", "meter", "nav", "noframes", "noscript", "object",
        "ol", "optgroup", "option", "output", "p", "param", "picture", "pre", "progress",
        "q", "rp", "rt", "ruby", "s", "samp", "script", "search", "section", "select",
        "small", "source", "span", "strike", "strong", "style", "sub", "summary", "sup",
        "svg", "table", "tbody", "td", "template", "textarea", "tfoot", "th", "thead",
        "time", "title", "tr", "track", "tt", "u", "ul", "var", "video", "wbr"
    ]);
    const setOfMarksTags = new Set([
        "input", "textarea", "select", "button", "a", "iframe", "video", "li", "td", "option"
    ]);

    const state = {
        __proto__: null,
        counter: previous ? previous.counter : 0,
        frames: previous ? previous.frames : 0,
        elements: { __proto__: null },
        origin: location.origin,
    };
    const recorded = previous ? previous.elements : null;

    // Frames get letters, the first lower-case and the rest upper-case ('a' … 'z', 'aA',
    // 'aB' …), as BrowserGym numbers them: what the bid grammar reads as a frame prefix.
    const frameId = (n) => {
        let digits = 1;
        let span = 26;
        while (n >= span) {
            n -= span;
            digits += 1;
            span *= 26;
        }
        let id = "";
        for (let i = 0; i < digits; i++) {
            const letter = "abcdefghijklmnopqrstuvwxyz"[n % 26];
            id = (i < digits - 1 ? letter.toUpperCase() : letter) + id;
            n = Math.floor(n / 26);
        }
        return id;
    };

    const toVisit = new Set();
    const observer = new IntersectionObserver((entries) => {
        entries.forEach((entry) => {
            const elem = entry.target;
            elem.setAttribute("browsergym_visibility_ratio",
                              Math.round(entry.intersectionRatio * 100) / 100);
            toVisit.delete(elem);
        });
    }, { threshold: [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0] });

    let elements = Array.from(document.querySelectorAll("*"));
    const somButtons = [];
    let i = 0;
    while (i < elements.length) {
        const elem = elements[i];
        if (elem.shadowRoot !== null) {
            elements = [
                ...elements.slice(0, i + 1),
                ...Array.from(elem.shadowRoot.querySelectorAll("*")),
                ...elements.slice(i + 1),
            ];
        }
        i++;
        if (!elem.tagName || !htmlTags.has(elem.tagName.toLowerCase())) continue;

        elem.setAttribute("browsergym_visibility_ratio", 0);
        toVisit.add(elem);
        observer.observe(elem);
        if (typeof elem.value !== "undefined") elem.setAttribute("value", elem.value);
        if (typeof elem.checked !== "undefined") {
            if (elem.checked === true) elem.setAttribute("checked", "");
            else elem.removeAttribute("checked");
        }

        // Kept only where the last marking of this document put this very element.
        let bid = elem.getAttribute(attribute);
        if (bid === null || recorded === null || recorded[bid] !== elem
                || state.elements[bid] !== undefined) {
            const tag = elem.tagName.toLowerCase();
            const local = tag === "iframe" || tag === "frame"
                ? frameId(state.frames++) : `${state.counter++}`;
            bid = `${parentBid}${local}`;
            elem.setAttribute(attribute, bid);
        }
        state.elements[bid] = elem;

        pushBid(bid, elem, "aria-roledescription");
        pushBid(bid, elem, "aria-description");  // fallback for generic nodes

        // set-of-marks flag (He et al. 2024), as BrowserGym sets it
        elem.setAttribute("browsergym_set_of_marks", "0");
        if (["self", "child"].includes(whoCapturesCenterClick(elem))) {
            if (setOfMarksTags.has(elem.tagName.toLowerCase()) || elem.onclick != null
                    || window.getComputedStyle(elem).cursor == "pointer") {
                const rect = elem.getBoundingClientRect();
                const area = (rect.right - rect.left) * (rect.bottom - rect.top);
                if (area >= 20 && somButtons.every((button) => !button.contains(elem))) {
                    let parent = elem.parentElement;
                    if (!(parent && parent.tagName.toLowerCase() == "span"
                          && parent.children.length === 1 && parent.getAttribute("role")
                          && parent.getAttribute("browsergym_set_of_marks") === "1")) {
                        elem.setAttribute("browsergym_set_of_marks", "1");
                        if (elem.matches('button, a, input[type="button"], div[role="button"]')) {
                            somButtons.push(elem);
                        }
                        while (parent) {
                            if (parent.getAttribute("browsergym_set_of_marks") === "1") {
                                parent.setAttribute("browsergym_set_of_marks", "0");
                            }
                            parent = parent.parentElement;
                        }
                    }
                }
            }
        }
    }

    // wait (bounded) for every element's visibility ratio
    await new Promise((resolve) => {
        const started = Date.now();
        const check = () => {
            if (toVisit.size === 0 || Date.now() - started > 1000) resolve();
            else setTimeout(check, 40);
        };
        check();
    });
    observer.disconnect();
    return state;

    function pushBid(bid, elem, attr) {
        const original = elem.hasAttribute(attr) ? elem.getAttribute(attr) : "";
        elem.setAttribute(attr, `browsergym_id_${bid} ${original}`);
    }

    function whoCapturesCenterClick(element) {
        const rect = element.getBoundingClientRect();
        const x = (rect.left + rect.right) / 2;
        const y = (rect.top + rect.bottom) / 2;
        const atCenter = elementFromPoint(x, y);
        if (!atCenter) return "nobody";
        if (atCenter === element) return "self";
        if (element.contains(atCenter)) return "child";
        return "non-descendant";
    }

    function elementFromPoint(x, y) {
        let dom = document;
        let last = null;
        let elem = null;
        do {
            last = elem;
            elem = dom.elementFromPoint(x, y);
            dom = elem?.shadowRoot;
        } while (dom && elem !== last);
        return elem;
    }
}
