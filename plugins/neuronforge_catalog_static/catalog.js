// The artifact catalog's script (served as a file: the page's Content-Security-Policy allows no
// inline script).

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
