// The viewport boxes of the fields secrets were typed into and of the password fields of
// the observed document, read from linewise's private world (page scripts cannot hide a
// field from it by renaming or unmarking it).
function () {
  const boxes = [];
  const add = (el) => {
    if (!el.isConnected || el.ownerDocument !== document) return;
    for (const r of el.getClientRects()) boxes.push([r.left, r.top, r.width, r.height]);
  };
  const state = globalThis.__linewise;
  if (state) state.secretFields.forEach(add);
  document.querySelectorAll("input[type=password]").forEach(add);
  return { boxes, width: innerWidth };
}
