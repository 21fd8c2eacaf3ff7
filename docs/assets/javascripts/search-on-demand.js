// The search on demand (issue 25). Material starts its search worker (lunr, 40 KB) and asks for
// search/search_index.json (the text and code of every page: the largest file the site sends) as every
// page loads, and most readers of a page never search. This script runs before Material's bundle and holds
// both until the reader reaches for the search: focuses, taps or points at the search box, or presses one
// of Material's search keys (/, s, f). A page opened from a search result (?h=...: search.highlight) starts
// them at once. Material gets a stand-in worker that queues its messages until then; any other worker or
// request is untouched.
(() => {
  const INDEX = /\/search\/search_index\.json(?:$|\?)/;
  const open = XMLHttpRequest.prototype.open;
  const send = XMLHttpRequest.prototype.send;
  const WORKER = /\/workers\/search\.[\w-]+\.min\.js(?:$|\?)/;
  const held = [];
  let wanted = new URLSearchParams(location.search).has("h");

  const RealWorker = window.Worker;
  class SearchWorkerOnDemand extends EventTarget {
    constructor(url, options) {
      super();
      this.queue = [];
      held.push(() => {
        this.real = new RealWorker(url, options);
        for (const type of ["message", "messageerror", "error"]) {
          this.real.addEventListener(type, (event) => this.dispatchEvent(
            type === "error" ? new Event("error") : new MessageEvent(type, { data: event.data })));
        }
        this.queue.splice(0).forEach((message) => this.real.postMessage(message));
      });
    }
    postMessage(message) {
      if (this.real) this.real.postMessage(message);
      else this.queue.push(message);
    }
    terminate() {
      if (this.real) this.real.terminate();
    }
  }
  window.Worker = function Worker(url, options) {
    return !wanted && WORKER.test(String(url)) ? new SearchWorkerOnDemand(url, options) : new RealWorker(url, options);
  };
  window.Worker.prototype = RealWorker.prototype;

  XMLHttpRequest.prototype.open = function (method, url, ...rest) {
    this.vtSearchIndex = INDEX.test(String(url));
    return open.call(this, method, url, ...rest);
  };
  XMLHttpRequest.prototype.send = function (...args) {
    if (this.vtSearchIndex && !wanted) {
      held.push(() => send.apply(this, args));
      return;
    }
    return send.apply(this, args);
  };

  const want = () => {
    if (wanted) return;
    wanted = true;
    held.splice(0).forEach((request) => request());
  };
  const searchBox = (target) =>
    target instanceof Element && !!target.closest(".md-search, [for='__search'], #__search");
  for (const type of ["focusin", "pointerdown", "touchstart", "mouseover"]) {
    document.addEventListener(type, (event) => searchBox(event.target) && want(), { capture: true, passive: true });
  }
  document.addEventListener("change", (event) => event.target.id === "__search" && want(), { capture: true });
  document.addEventListener("keydown", (event) => {
    const typing = event.target instanceof Element && event.target.closest("input, textarea, [contenteditable]");
    if (!typing && ["/", "s", "S", "f", "F"].includes(event.key)) want();
  }, { capture: true });
})();
