/**
 * Elements of this frame whose text a person cannot see, by bid, with the reason:
 * "visibility" (visibility hidden/collapse), "opacity" (the opacities up the tree
 * multiply to nearly 0), "off-screen" (the box lies wholly outside the document),
 * "zero-size" (the element, or an ancestor that clips its overflow, is at most 1px
 * wide or high), "font-size" (text under 1px), "colour" (text in the colour of the
 * background behind it, or fully transparent text).
 *
 * Each element is judged on its own computed state, so a visible child of a hidden
 * element is not reported; text nodes take the verdict of their element.
 */
(bidAttribute) => {
    const hidden = {};
    const doc = document.documentElement;
    const docWidth = Math.max(doc.scrollWidth, doc.clientWidth);
    const docHeight = Math.max(doc.scrollHeight, doc.clientHeight);
    const styles = new Map();
    const style = (el) => {
        let s = styles.get(el);
        if (s === undefined) {
            s = window.getComputedStyle(el);
            styles.set(el, s);
        }
        return s;
    };
    const parentOf = (el) => el.parentElement || (el.parentNode && el.parentNode.host) || null;
    const rgba = (text) => {
        const m = text.match(/rgba?\(([^)]+)\)/);
        if (!m) return null;
        const parts = m[1].split(/[ ,/]+/).filter((p) => p).map(Number);
        return [parts[0], parts[1], parts[2], parts.length > 3 ? parts[3] : 1];
    };
    const background = (el) => {
        for (let node = el; node; node = parentOf(node)) {
            const c = rgba(style(node).backgroundColor);
            if (c && c[3] > 0.5) return c;
            if (style(node).backgroundImage !== "none") return null;  // unknown: an image
        }
        return [255, 255, 255, 1];
    };
    const ownText = (el) => {
        for (const child of el.childNodes) {
            if (child.nodeType === Node.TEXT_NODE && child.textContent.trim()) return true;
        }
        return false;
    };
    const clips = (s) => s.overflow !== "visible" || s.clip.startsWith("rect")
        || s.clipPath.startsWith("inset") || s.clipPath.startsWith("circle(0");
    const reason = (el) => {
        const s = style(el);
        // Closed <select> options have no box, and a select's choices are not hidden text.
        if (s.display === "contents" || el.closest("select, datalist")) return null;
        if (s.visibility === "hidden" || s.visibility === "collapse") return "visibility";
        let opacity = 1;
        for (let node = el; node; node = parentOf(node)) {
            opacity *= parseFloat(style(node).opacity);
            if (opacity < 0.05) return "opacity";
        }
        const text = ownText(el);
        if (text && parseFloat(s.fontSize) < 1) return "font-size";
        const box = el.getBoundingClientRect();
        const left = box.left + window.scrollX, top = box.top + window.scrollY;
        if (box.width > 0 || box.height > 0) {
            if (left + box.width <= 0 || top + box.height <= 0
                || left >= docWidth || top >= docHeight) return "off-screen";
        }
        if ((box.width <= 1 || box.height <= 1) && clips(s)) return "zero-size";
        if (box.width * box.height === 0 && text) return "zero-size";
        for (let node = parentOf(el); node; node = parentOf(node)) {
            const b = node.getBoundingClientRect();
            if ((b.width <= 1 || b.height <= 1) && clips(style(node))) return "zero-size";
        }
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
