// The viewport boxes of everything in the observed document that shows a secret: the
// fields secrets were typed into, the password fields, any other field whose value holds
// a secret, and every piece of text that holds one (a page that echoes "Copy: ..."), a
// value split over several text nodes by the smallest element holding it whole. Read
// from linewise's private world (page scripts cannot hide a field from it by renaming or
// unmarking it). ``values``: the secrets' values. ``phase``: "before" a capture pauses
// the animations of those elements and their ancestors and waits two frames (at most
// 200 ms), so that the compositor, which draws what a capture shows, holds them still
// where they are measured; "after" measures again and lets them run on.
async function (values, phase) {
  const state = globalThis.__linewise || { secretFields: new Set() };
  values = (values || []).filter((v) => v);
  const showing = () => {
    const found = new Set();
    const add = (el) => { if (el && el.isConnected && el.ownerDocument === document) found.add(el); };
    state.secretFields.forEach(add);
    document.querySelectorAll("input[type=password]").forEach(add);
    const texts = [];
    if (!values.length) return { found, texts };
    const holds = (text) => values.some((v) => text.includes(v));
    for (const el of document.querySelectorAll("input, textarea, select")) {
      if (holds(String(el.value || ""))) add(el);
    }
    const whole = new Set();
    const walker = document.createTreeWalker(document.documentElement, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const v of values) {
        for (let at = node.data.indexOf(v); at >= 0; at = node.data.indexOf(v, at + 1)) {
          whole.add(v);
          texts.push([node, at, v.length]);
          add(node.parentElement);
        }
      }
    }
    const all = document.documentElement.textContent || "";
    for (const v of values) {
      if (whole.has(v) || !all.includes(v)) continue;
      // Split over text nodes ("hun<b>ter2</b>"): the elements that hold it whole and
      // have no child element that does.
      for (const el of document.querySelectorAll("body *")) {
        if ((el.textContent || "").includes(v)
            && ![...el.children].some((c) => (c.textContent || "").includes(v))) add(el);
      }
    }
    return { found, texts };
  };
  let { found, texts } = showing();
  if (phase === "before") {
    state.pausedAnimations = [];
    for (const start of found) {
      for (let el = start; el; el = el.parentElement || el.getRootNode().host) {
        for (const animation of el.getAnimations()) {
          if (animation.playState === "running") {
            animation.pause();
            state.pausedAnimations.push(animation);
          }
        }
      }
    }
    if (state.pausedAnimations.length) {
      await Promise.race([
        new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done))),
        new Promise((done) => setTimeout(done, 200)),
      ]);
      ({ found, texts } = showing());
    }
  }
  const boxes = [];
  const addRects = (rects) => {
    for (const r of rects) if (r.width > 0 && r.height > 0) boxes.push([r.left, r.top, r.width, r.height]);
  };
  const textNodes = new Set(texts.map(([node]) => node.parentElement));
  for (const el of found) {
    // An element found only for its text is masked over that text, not whole.
    if (!textNodes.has(el) || el.matches("input, textarea, select, [type=password]")) {
      addRects(el.getClientRects());
    }
  }
  const range = document.createRange();
  for (const [node, at, length] of texts) {
    range.setStart(node, at);
    range.setEnd(node, at + length);
    addRects(range.getClientRects());
  }
  if (phase === "after") {
    for (const animation of state.pausedAnimations || []) {
      try { animation.play(); } catch (e) { /* it was removed meanwhile */ }
    }
    state.pausedAnimations = [];
  }
  return { boxes, width: innerWidth };
}
