// The artifact catalog's script (served as a file: the page's Content-Security-Policy allows no
// inline script).

// The catalog in the Airflow UI's theme.
//
// Airflow 3's UI is a React app styled by Chakra UI: its colours are CSS variables on its own
// document's root (`--chakra-colors-bg`, `--chakra-colors-fg-muted`, ...), and its colour mode is the
// class `light` or `dark` on that root (next-themes, remembered in localStorage under `theme`). The
// catalog is another document, in a same-origin iframe of that app: it sees none of those variables.
// So: framed by the UI, the catalog takes the UI's mode and the values of the variables it uses, and
// follows when the user switches the mode; opened on its own, it takes the mode the UI remembers, else
// the system's (`prefers-color-scheme`), over catalog.css's copy of Airflow's palette.
(() => {
  // the catalog's variable <- the UI's
  const FROM_UI = {
    '--nf-bg': '--chakra-colors-bg',
    '--nf-bg-subtle': '--chakra-colors-bg-subtle',
    '--nf-bg-muted': '--chakra-colors-bg-muted',
    '--nf-fg': '--chakra-colors-fg',
    '--nf-fg-muted': '--chakra-colors-fg-muted',
    '--nf-border': '--chakra-colors-border',
    '--nf-border-emphasized': '--chakra-colors-border-emphasized',
    '--nf-link': '--chakra-colors-fg-info',
    '--nf-ok-bg': '--chakra-colors-bg-success',
    '--nf-bad-bg': '--chakra-colors-bg-error',
    '--nf-info-bg': '--chakra-colors-bg-info',
  };
  const root = document.documentElement;

  function ui() {
    try {
      const top = window.parent;
      if (top !== window && top.location.origin === window.location.origin) return top.document.documentElement;
    } catch (e) { /* another origin */ }
    return null;
  }

  function mode(uiRoot) {
    if (uiRoot && (uiRoot.classList.contains('dark') || uiRoot.classList.contains('light'))) {
      return uiRoot.classList.contains('dark') ? 'dark' : 'light';
    }
    let chosen = null;
    try { chosen = window.localStorage.getItem('theme'); } catch (e) { /* storage refused */ }
    if (chosen === 'dark' || chosen === 'light') return chosen;
    return window.matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light';
  }

  function follow() {
    const uiRoot = ui();
    const now = mode(uiRoot);
    root.classList.toggle('dark', now === 'dark');
    root.classList.toggle('light', now === 'light');
    if (!uiRoot) return;
    const style = window.parent.getComputedStyle(uiRoot);
    for (const [ours, theirs] of Object.entries(FROM_UI)) {
      const value = style.getPropertyValue(theirs).trim();
      if (value) root.style.setProperty(ours, value); else root.style.removeProperty(ours);
    }
  }

  follow();
  const uiRoot = ui();
  if (uiRoot) new MutationObserver(follow).observe(uiRoot, { attributes: true, attributeFilter: ['class'] });
  else window.matchMedia('(prefers-color-scheme: dark)').addEventListener('change', follow);
})();


// Each copy button copies its data-copy attribute.
for (const b of document.querySelectorAll('button.copy')) {
  b.addEventListener('click', async () => {
    try { await navigator.clipboard.writeText(b.dataset.copy); b.textContent = 'copied'; }
    catch (e) { b.textContent = 'select and copy'; }
  });
}

// A link to one of Airflow's own pages (target=_top: a run, the release DAG). Airflow shows the
// catalog in an iframe sandboxed without allow-top-navigation, where such a link does nothing; in
// it, the link moves the Airflow UI's own router (same origin), as its navigation would. Opened on
// its own, the catalog follows the link as any page does.
function openInAirflow(href) {
  try {
    const top = window.top;
    if (top !== window && top.location.origin === window.location.origin) {
      top.history.pushState(null, '', href);
      top.dispatchEvent(new PopStateEvent('popstate', { state: null }));
      return;
    }
  } catch (e) { /* another origin: a plain navigation */ }
  window.open(href, '_top');
}

for (const a of document.querySelectorAll('a[target=_top]')) {
  a.addEventListener('click', async (event) => {
    event.preventDefault();
    // a release confirmation's link copies its request first (Airflow's trigger form cannot be
    // filled from a link): without this script the request is on the page to copy by hand
    if (a.dataset.copy !== undefined) {
      try { await navigator.clipboard.writeText(a.dataset.copy); } catch (e) { /* shown on the page */ }
    }
    openInAirflow(a.href);
  });
}
