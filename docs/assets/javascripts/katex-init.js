// Typeset $...$ and $$...$$ (pymdownx.arithmatex, generic mode) with the KaTeX the site serves itself.
// Material's instant navigation swaps pages without a reload: document$ fires for each one.
document$.subscribe(({ body }) => {
  renderMathInElement(body, {
    delimiters: [
      { left: "$$", right: "$$", display: true },
      { left: "$", right: "$", display: false },
      { left: "\\(", right: "\\)", display: false },
      { left: "\\[", right: "\\]", display: true },
    ],
  });
});
