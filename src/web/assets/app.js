// Slipway's one script. Pages work without it; with it they update live
// and a form cannot be sent twice from one page.
// biome-ignore lint/suspicious/noRedundantUseStrict: a classic script in the browser, not a module
'use strict';

// A form marked data-once is sent once: its buttons are disabled right after
// the browser has taken the pressed one's value (disabling it during the
// submit event would drop that value). A button with data-confirm (one that
// ends other people's work) asks first; without this script, the press is
// sent as it is.
document.addEventListener('submit', (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement) || !form.hasAttribute('data-once')) return;
  const question = event.submitter?.dataset.confirm;
  if (question && !form.dataset.sent && !window.confirm(question)) {
    event.preventDefault();
    return;
  }
  if (form.dataset.sent) {
    event.preventDefault();
    return;
  }
  form.dataset.sent = 'yes';
  setTimeout(() => {
    for (const button of form.querySelectorAll('button')) button.disabled = true;
  }, 0);
});

// Live updates. The server sends `changed` events listing the objects and
// commands that changed ("lease:12", "command:40"), already coalesced. A
// page refreshes its <main> when something it shows changed: soon for a
// page about one object, at most every few seconds for lists and the
// overview ("*"), so an open page costs the database little.
const SOON_MS = 150;
const WILDCARD_MS = 2000;
const status = () => document.getElementById('live-status');
let timer;

function watched() {
  return (document.body.dataset.watch || '').split(' ').filter(Boolean);
}

function schedule(ms) {
  if (timer === undefined) timer = setTimeout(refresh, ms);
}

// A reason being written in a button's form (not a list's filter, which the refreshed page repeats).
function busyEditing() {
  return [...document.querySelectorAll('main form[data-once] input[type=text]')].some(
    (input) => input === document.activeElement || input.value !== '',
  );
}

async function refresh() {
  timer = undefined;
  // Someone typing a reason keeps their text: try again shortly.
  if (busyEditing()) return schedule(1000);
  let response;
  try {
    response = await fetch(location.href, { headers: { accept: 'text/html' }, credentials: 'same-origin' });
  } catch {
    return schedule(WILDCARD_MS);
  }
  if (!response.ok || response.redirected) {
    location.reload();
    return;
  }
  const page = new DOMParser().parseFromString(await response.text(), 'text/html');
  const main = page.getElementById('main');
  if (!main) return;
  document.getElementById('main').replaceChildren(...main.childNodes);
  document.body.dataset.watch = page.body.dataset.watch || '';
  document.title = page.title;
  const line = status();
  if (line) line.textContent = `live · updated ${new Date().toISOString().slice(11, 19)}Z`;
  showRelativeTimes();
}

// Times as people read them ("3 min ago", "in 2 h"), from each <time>'s
// exact value; the exact UTC time stays on hover. Below ten seconds they
// keep a tenth, so the events of one second still read in order.
function relative(ms) {
  const abs = Math.abs(ms);
  const amount =
    abs < 10_000
      ? `${(abs / 1000).toFixed(1)} s`
      : abs < 60_000
        ? `${Math.round(abs / 1000)} s`
        : abs < 3_600_000
          ? `${Math.round(abs / 60_000)} min`
          : abs < 172_800_000
            ? `${Math.round(abs / 3_600_000)} h`
            : `${Math.round(abs / 86_400_000)} d`;
  return ms <= 0 ? `${amount} ago` : `in ${amount}`;
}

function showRelativeTimes() {
  const now = Date.now();
  for (const time of document.querySelectorAll('time[datetime]')) {
    time.textContent = relative(Date.parse(time.getAttribute('datetime')) - now);
  }
}

showRelativeTimes();
setInterval(showRelativeTimes, 5000);

function listen() {
  if (watched().length === 0) return;
  const events = new EventSource('/events');
  let lost = false;
  events.addEventListener('changed', (event) => {
    const changed = JSON.parse(event.data);
    const watch = watched();
    // '*resync': the server may have missed changes (see changeFeed.ts).
    if (changed.includes('*resync') || changed.some((target) => watch.includes(target))) schedule(SOON_MS);
    else if (watch.includes('*')) schedule(WILDCARD_MS);
  });
  events.addEventListener('open', () => {
    const line = status();
    if (line) line.textContent = 'live';
    // Reconnected: whatever changed meanwhile was not heard, so look again.
    if (lost) schedule(SOON_MS);
    lost = false;
  });
  events.addEventListener('error', () => {
    lost = true;
    const line = status();
    if (line) line.textContent = 'live updates interrupted; reconnecting…';
  });
}

listen();
