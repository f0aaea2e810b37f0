// A dependency-free WGSL editor: a <textarea> (the browser's own editing,
// undo, selection, accessibility) over a <pre> that shows the same text
// highlighted, with line numbers and the compiler's messages marked at
// their line and column. The page has no bundler and must work offline,
// so no editor library is fetched.

const KEYWORDS = new Set(
  'fn var let const override struct return if else for loop while break continue continuing switch case default discard alias enable requires true false'.split(' '),
);
const TYPES = new Set(
  'f32 f16 i32 u32 bool vec2 vec3 vec4 vec2f vec3f vec4f vec2u vec3u vec4u vec2i vec3i vec4i mat2x2 mat3x3 mat4x4 mat4x4f array atomic ptr storage uniform workgroup function private read write read_write sampler texture_2d'.split(
    ' ',
  ),
);
const BUILTINS = new Set(
  'atomicAdd atomicSub atomicMax atomicMin atomicLoad atomicStore atomicExchange atomicAnd atomicOr atomicXor workgroupBarrier storageBarrier select clamp min max abs floor ceil round sqrt exp log pow sin cos dot arrayLength bitcast'.split(
    ' ',
  ),
);

// One pass over the source: comments, attributes, numbers, words, the rest.
const TOKEN = /(\/\/[^\n]*|\/\*[\s\S]*?\*\/)|(@\w+)|(\b(?:0x[0-9a-fA-F]+|\d+\.?\d*(?:e[+-]?\d+)?|\.\d+(?:e[+-]?\d+)?)[uif]?\b)|([A-Za-z_]\w*)/g;

const escape = (s) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** The highlighted HTML of `code` (every character kept, so the overlay
 * lines up with the textarea). */
export function highlight(code) {
  let out = '';
  let last = 0;
  for (const m of code.matchAll(TOKEN)) {
    out += escape(code.slice(last, m.index));
    const [text, comment, attr, num, word] = m;
    let cls = null;
    if (comment) cls = 'c';
    else if (attr) cls = 'a';
    else if (num) cls = 'n';
    else if (word && KEYWORDS.has(word)) cls = 'k';
    else if (word && TYPES.has(word)) cls = 't';
    else if (word && BUILTINS.has(word)) cls = 'b';
    out += cls ? `<span class="tok-${cls}">${escape(text)}</span>` : escape(text);
    last = m.index + text.length;
  }
  return out + escape(code.slice(last));
}

export class Editor {
  /** Builds the editor inside `host` (a div). `onChange(code)` is called on
   * every edit. */
  constructor(host, onChange) {
    host.classList.add('editor');
    this.gutter = document.createElement('div');
    this.gutter.className = 'gutter';
    this.gutter.setAttribute('aria-hidden', 'true');
    const wrap = document.createElement('div');
    wrap.className = 'code-wrap';
    this.pre = document.createElement('pre');
    this.pre.className = 'highlight';
    this.pre.setAttribute('aria-hidden', 'true');
    this.marks = document.createElement('pre');
    this.marks.className = 'marks';
    this.marks.setAttribute('aria-hidden', 'true');
    this.area = document.createElement('textarea');
    this.area.id = 'code';
    this.area.spellcheck = false;
    this.area.setAttribute('autocapitalize', 'off');
    this.area.setAttribute('autocomplete', 'off');
    this.area.setAttribute('aria-label', 'WGSL compute shader');
    wrap.append(this.pre, this.marks, this.area);
    host.append(this.gutter, wrap);
    this.messages = [];
    this.area.addEventListener('input', () => {
      // An edit makes the old markers point at the wrong text.
      this.messages = [];
      this.render();
      onChange(this.area.value);
    });
    this.area.addEventListener('scroll', () => this.#sync());
    this.area.addEventListener('keydown', (e) => this.#key(e));
  }

  get value() {
    return this.area.value;
  }

  set value(code) {
    this.area.value = code;
    this.messages = [];
    this.render();
  }

  /** Marks the compiler's messages ({type, line, col, length, text}). */
  mark(messages) {
    this.messages = messages.filter((m) => m.line > 0);
    this.render();
  }

  /** Puts the caret at `line`, `col` (1-based) and focuses the editor. */
  goTo(line, col) {
    const lines = this.area.value.split('\n');
    let offset = 0;
    for (let i = 0; i < Math.min(line - 1, lines.length); i++) offset += lines[i].length + 1;
    offset += Math.max(0, col - 1);
    this.area.focus();
    this.area.setSelectionRange(offset, offset);
  }

  render() {
    const code = this.area.value;
    const lines = code.split('\n');
    const byLine = new Map();
    for (const m of this.messages) byLine.set(m.line, [...(byLine.get(m.line) ?? []), m]);
    this.pre.innerHTML = highlight(code) + '\n';
    // The markers: a layer of the same text, transparent, in which the
    // message's columns are underlined, so the place lines up exactly.
    this.marks.innerHTML =
      lines
        .map((text, i) => {
          const ms = byLine.get(i + 1);
          if (!ms) return '';
          const kind = ms.some((m) => m.type === 'error') ? 'error' : 'warning';
          const from = Math.max(0, ms[0].col - 1);
          const to = Math.max(from + 1, from + (ms[0].length || 1));
          const padded = text.padEnd(to, ' ');
          return `<span class="line-${kind}">${escape(padded.slice(0, from))}<span class="squiggle-${kind}">${escape(padded.slice(from, to))}</span>${escape(padded.slice(to))}</span>`;
        })
        .join('\n') + '\n';
    this.gutter.innerHTML = lines
      .map((_, i) => {
        const ms = byLine.get(i + 1);
        if (!ms) return String(i + 1);
        const kind = ms.some((m) => m.type === 'error') ? 'error' : 'warning';
        return `<span class="mark-${kind}" title="${escape(ms.map((m) => m.text).join('\n'))}" data-line="${i + 1}">${i + 1}</span>`;
      })
      .join('\n');
    this.#sync();
  }

  #sync() {
    for (const layer of [this.pre, this.marks]) {
      layer.scrollTop = this.area.scrollTop;
      layer.scrollLeft = this.area.scrollLeft;
    }
    this.gutter.scrollTop = this.area.scrollTop;
  }

  /** Tab indents by two spaces; Enter keeps the line's indentation. */
  #key(e) {
    const a = this.area;
    if (e.key === 'Tab' && !e.shiftKey && !e.ctrlKey && !e.metaKey) {
      e.preventDefault();
      document.execCommand('insertText', false, '  ');
    } else if (e.key === 'Enter' && !e.ctrlKey && !e.metaKey && !e.shiftKey) {
      const before = a.value.slice(0, a.selectionStart);
      const indent = /[ \t]*/.exec(before.slice(before.lastIndexOf('\n') + 1))[0];
      if (indent) {
        e.preventDefault();
        document.execCommand('insertText', false, `\n${indent}`);
      }
    }
  }
}
