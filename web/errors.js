// The message area at the top of the viewer: load, validation and run
// errors, and short notices, where the user looks (the left column may be
// scrolled anywhere). An error that names a parameter of a step also marks
// that input and puts the focus there.
import { $ } from './state.js';

/** Shows `text` ('' clears) as an 'error' or an 'info'. */
export function showMessage(text, kind = 'error') {
  const el = $('message');
  el.textContent = text;
  el.className = `message ${text ? kind : ''}`;
  $('message-box').hidden = !text;
  $('message-box').className = `message-box ${text ? kind : ''}`;
}

/** The parameter an error message names: 'invalid sigma: -1 (…)' gives
 * 'sigma' (the page's checks and the core's errors both say it so). */
export function paramOf(text) {
  return /\binvalid (\w+):/.exec(text)?.[1];
}

/** Marks the input of step `step` named `param` as invalid and focuses it;
 * returns whether there was one. */
export function markInvalid({ step, param }) {
  if (step === undefined || step === null || !param) return false;
  const el = document.querySelector(`#params [data-step="${step}"][name="${param}"]`);
  if (!el) return false;
  el.setAttribute('aria-invalid', 'true');
  el.setAttribute('aria-errormessage', 'message');
  el.focus();
  return true;
}

/** An error: the message at the top of the viewer, and the offending
 * input (step `step`, parameter named in the text) marked and focused. */
export function showError(text, where = {}) {
  showMessage(text, 'error');
  markInvalid({ step: where.step, param: where.param ?? paramOf(text) });
}
