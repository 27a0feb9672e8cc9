// Hide the text of password fields and of fields a secret was typed into while a
// screenshot is taken: on (true) adds a style sheet, off (false) removes it.
// Same-origin frames are covered too; cross-origin frames are out of reach.
(on) => {
  const ID = "__linewise_mask_secret_fields";
  const CSS = "input[type=password], [data-linewise-secret] {" +
    " color: transparent !important; text-shadow: none !important;" +
    " -webkit-text-fill-color: transparent !important;" +
    " background: #444 !important; caret-color: transparent !important; }";
  const docs = [document];
  for (const frame of document.querySelectorAll("iframe, frame")) {
    try { if (frame.contentDocument) docs.push(frame.contentDocument); } catch (e) {}
  }
  for (const doc of docs) {
    const old = doc.getElementById(ID);
    if (old) old.remove();
    if (on && (doc.head || doc.documentElement)) {
      const style = doc.createElement("style");
      style.id = ID;
      style.textContent = CSS;
      (doc.head || doc.documentElement).appendChild(style);
    }
  }
}
