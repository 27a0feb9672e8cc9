/**
 * Elements of this frame whose text a person cannot see, by bid, with the reason:
 * "visibility" (visibility hidden/collapse), "opacity" (the opacities up the tree
 * multiply to nearly 0), "off-screen" (the box lies wholly outside the document),
 * "zero-size" (the element, or an ancestor that clips its overflow, is at most 1px
 * wide or high; or text with no box at all), "font-size" (text under 1px), "colour"
 * (text in the colour of the background behind it, or fully transparent text).
 *
 * Each element is judged on its own computed state, so a visible child of a hidden
 * element is not reported; text nodes take the verdict of their element. Styles, boxes
 * and the per-ancestor answers are computed once per element (large pages have tens of
 * thousands), parents before children.
 */
(bidAttribute) => {
    const hidden = {};
    const doc = document.documentElement;
    const docWidth = Math.max(doc.scrollWidth, doc.clientWidth);
    const docHeight = Math.max(doc.scrollHeight, doc.clientHeight);
    const memo = (compute) => {
        const cache = new Map();
        return (el) => {
            if (!el) return undefined;
            let value = cache.get(el);
            if (value === undefined) {
                value = compute(el);
                cache.set(el, value);
            }
            return value;
        };
    };
    const parentOf = (el) => el.parentElement || (el.parentNode && el.parentNode.host) || null;
    const style = memo((el) => window.getComputedStyle(el));
    const box = memo((el) => el.getBoundingClientRect());
    const rgba = (text) => {
        const m = text.match(/rgba?\(([^)]+)\)/);
        if (!m) return null;
        const parts = m[1].split(/[ ,/]+/).filter((p) => p).map(Number);
        return [parts[0], parts[1], parts[2], parts.length > 3 ? parts[3] : 1];
    };
    const clips = (s) => s.overflow !== "visible" || s.clip.startsWith("rect")
        || s.clipPath.startsWith("inset") || s.clipPath.startsWith("circle(0");
    // The product of the opacities from the element up.
    const opacity = memo((el) => {
        const parent = parentOf(el);
        return parseFloat(style(el).opacity) * (parent ? opacity(parent) : 1);
    });
    // Whether the element or an ancestor is a box of at most 1px that clips its content.
    const squeezed = memo((el) => {
        const b = box(el);
        if ((b.width <= 1 || b.height <= 1) && clips(style(el))) return true;
        const parent = parentOf(el);
        return parent ? squeezed(parent) : false;
    });
    // The first opaque background behind the element; null behind an image.
    const background = memo((el) => {
        const s = style(el);
        const c = rgba(s.backgroundColor);
        if (c && c[3] > 0.5) return c;
        if (s.backgroundImage !== "none") return null;
        const parent = parentOf(el);
        return parent ? background(parent) : [255, 255, 255, 1];
    });
    const ownText = (el) => {
        for (const child of el.childNodes) {
            if (child.nodeType === Node.TEXT_NODE && child.textContent.trim()) return true;
        }
        return false;
    };
    const reason = (el) => {
        const s = style(el);
        // Closed <select> options have no box, and a select's choices are not hidden text.
        if (s.display === "contents" || el.closest("select, datalist")) return null;
        if (s.visibility === "hidden" || s.visibility === "collapse") return "visibility";
        if (opacity(el) < 0.05) return "opacity";
        const text = ownText(el);
        if (text && parseFloat(s.fontSize) < 1) return "font-size";
        const b = box(el);
        const left = b.left + window.scrollX, top = b.top + window.scrollY;
        if ((b.width > 0 || b.height > 0) && (left + b.width <= 0 || top + b.height <= 0
                                              || left >= docWidth || top >= docHeight)) {
            return "off-screen";
        }
        if (squeezed(el) || (text && b.width * b.height === 0)) return "zero-size";
        if (text) {
            const fg = rgba(s.color);
            if (fg && fg[3] < 0.05) return "colour";
            const bg = background(el);
            if (fg && bg && Math.abs(fg[0] - bg[0]) + Math.abs(fg[1] - bg[1])
                            + Math.abs(fg[2] - bg[2]) < 24) return "colour";
        }
        return null;
    };
    for (const el of document.querySelectorAll(`[${bidAttribute}]`)) {
        const why = reason(el);
        if (why) hidden[el.getAttribute(bidAttribute)] = why;
    }
    return hidden;
}
