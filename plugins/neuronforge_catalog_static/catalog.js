// The artifact catalog's copy buttons (served as a file: the page's Content-Security-Policy allows
// no inline script). Each button copies its data-copy attribute.
for (const b of document.querySelectorAll('button.copy')) {
  b.addEventListener('click', async () => {
    try { await navigator.clipboard.writeText(b.dataset.copy); b.textContent = 'copied'; }
    catch (e) { b.textContent = 'select and copy'; }
  });
}
