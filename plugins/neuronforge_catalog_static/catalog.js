// The artifact catalog's copy buttons (served as a file: the page's Content-Security-Policy allows
// no inline script). Each button copies its data-copy attribute.
for (const b of document.querySelectorAll('button.copy')) {
  b.addEventListener('click', async () => {
    try { await navigator.clipboard.writeText(b.dataset.copy); b.textContent = 'copied'; }
    catch (e) { b.textContent = 'select and copy'; }
  });
}
// A link that copies its data-copy before it is followed (a release confirmation's way to Airflow's
// trigger form, which cannot be filled from a link). Without this script it is a plain link, and the
// request is on the page to copy.
for (const a of document.querySelectorAll('a.copy-and-go')) {
  a.addEventListener('click', async (event) => {
    event.preventDefault();
    try { await navigator.clipboard.writeText(a.dataset.copy); } catch (e) { /* shown on the page */ }
    window.open(a.href, a.target || '_self');
  });
}
