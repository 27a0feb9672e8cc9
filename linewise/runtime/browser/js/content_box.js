/**
 * The box, in CSS pixels of the viewport, of what the page paints that a person sees:
 * text, replaced elements (images, fields, canvases...) and boxes with a background or
 * border of their own, each clipped to the viewport. Null for a page that shows
 * nothing. The screenshot of a task that lives in a corner of the viewport (MiniWoB++:
 * a 160x210 area in 1280x720) is cut to it, so that the task reads as a thumbnail.
 */
() => {
  const width = window.innerWidth, height = window.innerHeight;
  const body = document.body;
  if (!body) return null;
  // The page's own backdrop is no content: MiniWoB++ paints its body grey around the task.
  const backdrop = new Set([getComputedStyle(body).backgroundColor,
                            getComputedStyle(document.documentElement).backgroundColor,
                            'rgba(0, 0, 0, 0)', 'transparent']);
  const replaced = new Set(['IMG', 'SVG', 'CANVAS', 'VIDEO', 'IFRAME', 'INPUT', 'TEXTAREA',
                            'SELECT', 'BUTTON', 'OBJECT', 'EMBED', 'PROGRESS', 'METER']);
  let left = Infinity, top = Infinity, right = -Infinity, bottom = -Infinity;
  const add = (r) => {
    const l = Math.max(0, r.left), t = Math.max(0, r.top);
    const rr = Math.min(width, r.right), b = Math.min(height, r.bottom);
    if (rr <= l || b <= t) return;
    left = Math.min(left, l); top = Math.min(top, t);
    right = Math.max(right, rr); bottom = Math.max(bottom, b);
  };
  const seen = (el) => el.checkVisibility({ opacityProperty: true, visibilityProperty: true });
  for (const el of body.querySelectorAll('*')) {
    if (!seen(el)) continue;
    const style = getComputedStyle(el);
    const painted = replaced.has(el.tagName.toUpperCase()) ||
      !backdrop.has(style.backgroundColor) || style.backgroundImage !== 'none' ||
      ['Top', 'Right', 'Bottom', 'Left'].some((side) =>
        parseFloat(style[`border${side}Width`]) > 0 && style[`border${side}Style`] !== 'none');
    if (painted) add(el.getBoundingClientRect());
    for (const node of el.childNodes) {
      if (node.nodeType !== Node.TEXT_NODE || !node.textContent.trim()) continue;
      const range = document.createRange();
      range.selectNodeContents(node);
      add(range.getBoundingClientRect());
    }
  }
  if (right <= left) return null;
  return { x: left, y: top, width: right - left, height: bottom - top,
           viewport_width: width, viewport_height: height };
}
