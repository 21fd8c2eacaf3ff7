// Typeset the math authors wrote: pymdownx.arithmatex (generic mode) wraps each $...$ and $$...$$
// of a page's prose in an element of class "arithmatex", delimited by \( \) or \[ \]. Only those
// elements are typeset, so a dollar sign in recorded output or in an evidence table stays text.
// Material's instant navigation swaps pages without a reload: document$ fires for each one.
document$.subscribe(({ body }) => {
  for (const element of body.querySelectorAll(".arithmatex")) {
    renderMathInElement(element, {
      delimiters: [
        { left: "\\(", right: "\\)", display: false },
        { left: "\\[", right: "\\]", display: true },
      ],
    });
  }
});
