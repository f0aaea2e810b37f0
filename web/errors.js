// The message area: load, validation and run errors, and short notices.
import { $ } from './state.js';

export function showMessage(text, kind = 'error') {
  const el = $('message');
  el.textContent = text;
  el.className = `message ${text ? kind : ''}`;
}
