// Tables on a phone (issue 25). A table wider than its column on a phone is marked data-vt-cards, and
// each of its cells gets its column's name (data-label): verified.css shows it as cards, one per row, so
// no column (a target, a verdict) is ever past the right edge. A table that fits stays a table. Tables in
// a closed fold or a hidden tab have no width yet: a ResizeObserver looks at each table again whenever
// its size changes (shown, or the window narrowed).
(() => {
  const phone = window.matchMedia("(max-width: 44.9375em)");

  function label(table) {
    // textContent, not innerText: a table in a closed fold has its width (so it reflows) but no rendered
    // text, and innerText would name every column "".
    const names = [...table.querySelectorAll(":scope > thead > tr > th")]
      .map((th) => th.textContent.replace(/\s+/g, " ").trim());
    for (const row of table.querySelectorAll(":scope > tbody > tr")) {
      [...row.children].forEach((cell, i) => { if (names[i]) cell.dataset.label = names[i]; });
    }
  }

  function reflow(table) {
    if (!phone.matches || table.hasAttribute("data-vt-cards") || !table.offsetWidth) return;
    // Past the right edge: a row's last cell ends beyond what the frame (and the window) shows.
    const frame = table.closest(".md-typeset__scrollwrap") || table.parentElement;
    const right = Math.min(frame.getBoundingClientRect().left + frame.clientWidth, window.innerWidth);
    const ends = [...table.rows].map((row) => row.cells.length && row.cells[row.cells.length - 1]);
    if (ends.some((cell) => cell && cell.getBoundingClientRect().right > right + 1)) {
      label(table);
      table.setAttribute("data-vt-cards", "");
    }
  }

  const start = () => {
    const tables = [...document.querySelectorAll(".md-typeset table:not([class])")]
      .filter((table) => !table.closest(".highlight"));
    const watch = new ResizeObserver((entries) => entries.forEach((entry) => reflow(entry.target)));
    tables.forEach((table) => { reflow(table); watch.observe(table); });
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();

// A region that scrolls sideways (a wide equation on a phone, a code block) can be reached and scrolled
// from the keyboard: it gets a Tab stop (Material gives one to code blocks that scroll; this covers the
// rest). Looked at once everything has loaded (KaTeX included) and again when the window changes size.
(() => {
  const SCROLLERS = ".md-content :is(div.arithmatex, .md-typeset__scrollwrap, .md-typeset__table, pre > code)";
  const mark = () => {
    for (const region of document.querySelectorAll(SCROLLERS)) {
      const scrolls = region.scrollWidth > region.clientWidth + 1 &&
        ["auto", "scroll"].includes(getComputedStyle(region).overflowX);
      if (scrolls && !region.hasAttribute("tabindex")) region.setAttribute("tabindex", "0");
    }
  };
  let timer = 0;
  window.addEventListener("load", () => requestAnimationFrame(mark));
  window.addEventListener("resize", () => { clearTimeout(timer); timer = setTimeout(mark, 200); });
})();

// Figures open full size on a tap (issue 25). Each figure image links to its PNG (tools/verified_triton/site/directives/
// figures.py); the first tap loads GLightbox (published from the pinned mkdocs-glightbox package under
// assets/glightbox/) and opens the image in it. Pages that are never tapped never load it.
(() => {
  let loading = null;
  const base = () => {
    const config = document.getElementById("__config");
    return new URL(((config && JSON.parse(config.textContent).base) || ".") + "/assets/glightbox/", location.href);
  };
  const load = () => loading || (loading = new Promise((resolve, reject) => {
    const folder = base();
    const style = document.createElement("link");
    style.rel = "stylesheet";
    style.href = new URL("glightbox.min.css", folder);
    document.head.appendChild(style);
    const script = document.createElement("script");
    script.src = new URL("glightbox.min.js", folder);
    script.onload = () => resolve(window.GLightbox);
    script.onerror = reject;
    document.head.appendChild(script);
  }));

  document.addEventListener("click", (event) => {
    const link = event.target instanceof Element && event.target.closest("a.vt-zoom");
    if (!link || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey) return;
    event.preventDefault();
    const image = link.querySelector("img");
    const caption = link.closest("figure")?.querySelector("figcaption")?.innerText || image?.alt || "";
    load().then((GLightbox) => {
      const box = GLightbox({ elements: [{ href: link.href, type: "image", description: caption }],
                              touchNavigation: true, loop: false, zoomable: true, draggable: true });
      box.on("close", () => { box.destroy(); link.focus(); });
      box.open();
    }, () => { location.href = link.href; });  // no lightbox: the PNG itself
  });
})();
