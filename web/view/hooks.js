// The view modules' hooks as the page's modules see them: set once by
// app.js (createViews in web/view/index.js), read where the page loads an
// image, draws a layer, reads out a pixel or writes a link.
export let views = null;
export function setViews(v) {
  views = v;
}
