/**
 * The bid of the focused element in this frame, diving through shadow roots,
 * and whether that element is an iframe (then the caller looks inside it).
 */
(bidAttribute) => {
    let element = document.activeElement;
    while (element && element.shadowRoot && element.shadowRoot.activeElement) {
        element = element.shadowRoot.activeElement;
    }
    if (!element || element === document.body) {
        return { bid: "", isFrame: false };
    }
    const tag = element.tagName.toLowerCase();
    return {
        bid: element.getAttribute(bidAttribute) || "",
        isFrame: tag === "iframe" || tag === "frame",
    };
}
