// The lab's own WebGPU device and the path from a student's WGSL to numbers:
// compile (with the compiler's messages), check the limits before the
// driver does (so the explanation is the lesson's, not a validation dump),
// build the bind group the exercise declares, dispatch, time, read back.
//
// The lab talks to WebGPU directly rather than through the wasm engine:
// the student's shader is the point, and every step of its launch is shown.

/** The compute limits the lab shows and asks the adapter for in full, so a
 * student sees what their own GPU allows rather than WebGPU's defaults. */
export const SHOWN_LIMITS = [
  ['maxComputeInvocationsPerWorkgroup', 'invocations per workgroup (CUDA: threads per block, 1024)'],
  ['maxComputeWorkgroupSizeX', 'workgroup size x'],
  ['maxComputeWorkgroupSizeY', 'workgroup size y'],
  ['maxComputeWorkgroupSizeZ', 'workgroup size z'],
  ['maxComputeWorkgroupsPerDimension', 'workgroups per dimension (CUDA: grid size, 2³¹−1 in x, 65535 in y, z)'],
  ['maxComputeWorkgroupStorageSize', 'bytes of var<workgroup> memory (CUDA: shared memory per block, 48 KiB)'],
  ['maxStorageBufferBindingSize', 'bytes of one storage buffer binding'],
];

/** A kernel that ran past this is taken as stuck: the device is destroyed
 * and made again, because a tab cannot interrupt a running dispatch. */
export const STUCK_MS = 20_000;

export class LabError extends Error {
  /** `kind`: 'compile' (with `messages`), 'limit', 'pipeline', 'dispatch',
   * 'device'. */
  constructor(kind, message, extra = {}) {
    super(message);
    this.name = 'LabError';
    this.kind = kind;
    Object.assign(this, extra);
  }
}

export class Gpu {
  constructor() {
    this.adapter = null;
    this.device = null;
    this.hasTimestamps = false;
    this.losses = 0; // devices lost and recreated, for the page to say so
    this.onLost = () => {};
    this.copyBandwidth = null; // bytes/s, measured once per device
    this.stuckMs = STUCK_MS; // the tests shorten it to see the watchdog act
  }

  /** Opens (or reopens) the adapter and device. Rejects with a LabError
   * saying why WebGPU is not there. */
  async open() {
    if (!navigator.gpu) throw new LabError('device', 'This browser has no WebGPU (navigator.gpu is missing): use a recent Chrome, Edge or Firefox, over https or http://127.0.0.1.');
    this.adapter = await navigator.gpu.requestAdapter({ powerPreference: 'high-performance' });
    if (!this.adapter) throw new LabError('device', 'WebGPU gave no adapter: the GPU may be blocklisted, or hardware acceleration is off in the browser settings.');
    const requiredLimits = {};
    for (const [name] of SHOWN_LIMITS) requiredLimits[name] = this.adapter.limits[name];
    requiredLimits.maxBufferSize = this.adapter.limits.maxBufferSize;
    this.hasTimestamps = this.adapter.features.has('timestamp-query');
    const device = await this.adapter.requestDevice({
      requiredFeatures: this.hasTimestamps ? ['timestamp-query'] : [],
      requiredLimits,
    });
    this.device = device;
    this.copyBandwidth = null;
    device.lost.then((info) => this.#lost(device, info));
    return device;
  }

  async #lost(device, info) {
    if (device !== this.device) return; // an old device, already replaced
    this.device = null;
    this.losses++;
    let error = null;
    try {
      await this.open();
    } catch (e) {
      error = e;
    }
    this.onLost(info, error);
  }

  /** Waits for a device (the one being recreated after a loss, if any). */
  async ready() {
    for (let i = 0; i < 200 && !this.device; i++) await new Promise((r) => setTimeout(r, 50));
    if (!this.device) throw new LabError('device', 'The GPU device was lost and could not be recreated: reload the page.');
    return this.device;
  }

  get info() {
    const i = this.adapter?.info ?? {};
    return [i.vendor, i.architecture, i.device, i.description].filter(Boolean).join(' ') || 'unknown adapter';
  }

  limit(name) {
    return this.device?.limits[name] ?? this.adapter?.limits[name];
  }

  /** Compiles `code`: resolves to the module, or rejects with a LabError
   * whose `messages` are {type, line, col, offset, length, text}. */
  async compile(code) {
    const device = await this.ready();
    const module = device.createShaderModule({ code, label: 'student kernel' });
    const info = await module.getCompilationInfo();
    const messages = info.messages.map((m) => ({
      type: m.type,
      line: m.lineNum,
      col: m.linePos,
      offset: m.offset,
      length: m.length,
      text: m.message,
    }));
    const errors = messages.filter((m) => m.type === 'error');
    if (errors.length) {
      const first = errors[0];
      throw new LabError('compile', `The compiler found ${errors.length} error${errors.length > 1 ? 's' : ''}; the first, at line ${first.line}, column ${first.col}: ${first.text}`, { messages });
    }
    return { module, messages };
  }

  /** The pipeline of `module` with an explicit layout of the exercise's
   * bindings, so a student who leaves a binding unused still gets a valid
   * bind group. */
  async pipeline(module, bindings) {
    const device = await this.ready();
    const layout = device.createBindGroupLayout({
      entries: bindings.map((b) => ({
        binding: b.binding,
        visibility: GPUShaderStage.COMPUTE,
        buffer: { type: b.kind === 'uniform' ? 'uniform' : b.kind === 'read' ? 'read-only-storage' : 'storage' },
      })),
    });
    try {
      const pipeline = await device.createComputePipelineAsync({
        layout: device.createPipelineLayout({ bindGroupLayouts: [layout] }),
        compute: { module },
      });
      return { pipeline, layout };
    } catch (e) {
      throw new LabError('pipeline', `WebGPU refused the pipeline: ${e.message}`);
    }
  }

  /** Creates the buffers of `bindings` ({binding, kind, data: TypedArray,
   * name}); the 'rw' ones are cleared before each run, from `data`. */
  buffers(layout, bindings) {
    const device = this.device;
    const made = bindings.map((b) => {
      // Uniforms are padded to 16 bytes, everything to 4.
      const bytes = Math.max(16, Math.ceil(b.data.byteLength / 16) * 16);
      const usage =
        (b.kind === 'uniform' ? GPUBufferUsage.UNIFORM : GPUBufferUsage.STORAGE) |
        GPUBufferUsage.COPY_DST |
        GPUBufferUsage.COPY_SRC;
      const buffer = device.createBuffer({ size: bytes, usage, label: b.name });
      device.queue.writeBuffer(buffer, 0, b.data);
      return { ...b, buffer, bytes };
    });
    const bindGroup = device.createBindGroup({
      layout,
      entries: made.map((b) => ({ binding: b.binding, resource: { buffer: b.buffer } })),
    });
    return { made, bindGroup };
  }

  /** One timed dispatch of `count` ([x, y, z]) workgroups. The output
   * buffers are first reset to their initial data (histograms start at 0).
   * Resolves to {submitMs, doneMs, gpuMs|null}: the wall time until submit()
   * returned (the launch is asynchronous: nothing has run yet), until the
   * queue said the work is done, and the GPU's own timestamps. */
  async dispatch(pipeline, bound, count) {
    const device = this.device;
    for (const b of bound.made) if (b.kind === 'rw') device.queue.writeBuffer(b.buffer, 0, b.data);
    await device.queue.onSubmittedWorkDone(); // the uploads are not the kernel's time
    let query = null;
    if (this.hasTimestamps) {
      query = {
        set: device.createQuerySet({ type: 'timestamp', count: 2 }),
        resolve: device.createBuffer({ size: 16, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC }),
        read: device.createBuffer({ size: 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST }),
      };
    }
    device.pushErrorScope('validation');
    const t0 = performance.now();
    const encoder = device.createCommandEncoder();
    const pass = encoder.beginComputePass(
      query ? { timestampWrites: { querySet: query.set, beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 } } : {},
    );
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, bound.bindGroup);
    pass.dispatchWorkgroups(...count);
    pass.end();
    if (query) {
      encoder.resolveQuerySet(query.set, 0, 2, query.resolve, 0);
      encoder.copyBufferToBuffer(query.resolve, 0, query.read, 0, 16);
    }
    device.queue.submit([encoder.finish()]);
    const submitMs = performance.now() - t0;
    const error = await device.popErrorScope();
    if (error) throw new LabError('dispatch', `WebGPU refused the dispatch: ${error.message}`);
    await this.#waitOrDie(device.queue.onSubmittedWorkDone());
    const doneMs = performance.now() - t0;
    let gpuMs = null;
    if (query) {
      await query.read.mapAsync(GPUMapMode.READ);
      const t = new BigUint64Array(query.read.getMappedRange());
      // A zero or backwards pair means the adapter gave no usable stamps.
      if (t[1] > t[0] && t[0] > 0n) gpuMs = Number(t[1] - t[0]) / 1e6;
      query.read.unmap();
      query.set.destroy();
      query.resolve.destroy();
      query.read.destroy();
    }
    return { submitMs, doneMs, gpuMs };
  }

  /** Waits for `promise`; past STUCK_MS destroys the device (which ends the
   * kernel) and rejects: the loss handler makes a new device. */
  async #waitOrDie(promise) {
    let timer;
    const stuck = new Promise((_, reject) => {
      timer = setTimeout(() => {
        this.device?.destroy();
        reject(new LabError('device', `The kernel was still running after ${this.stuckMs / 1000} s: the lab destroyed the GPU device to stop it and is making a new one. Bound your loops (see the lesson's max_iter) or use a smaller input.`));
      }, this.stuckMs);
    });
    try {
      return await Promise.race([promise, stuck]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Reads a buffer back as a typed array of `type` ('u32' | 'f32'),
   * `length` elements. */
  async read(buffer, type, length) {
    const device = this.device;
    const bytes = length * 4;
    const staging = device.createBuffer({ size: Math.max(4, bytes), usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const encoder = device.createCommandEncoder();
    encoder.copyBufferToBuffer(buffer, 0, staging, 0, bytes);
    device.queue.submit([encoder.finish()]);
    await staging.mapAsync(GPUMapMode.READ);
    const copy = staging.getMappedRange().slice(0);
    staging.unmap();
    staging.destroy();
    return type === 'u32' ? new Uint32Array(copy) : new Float32Array(copy);
  }

  /** The device's buffer-to-buffer copy rate in bytes/s (read + write
   * counted), median of 5 copies of 16 MiB timed until the queue is done:
   * the yardstick for a kernel's bytes/s. Measured once per device. */
  async measureCopyBandwidth() {
    if (this.copyBandwidth) return this.copyBandwidth;
    const device = await this.ready();
    const size = Math.min(16 << 20, this.limit('maxBufferSize') / 2);
    const usage = GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
    const a = device.createBuffer({ size, usage });
    const b = device.createBuffer({ size, usage });
    const times = [];
    for (let i = 0; i < 6; i++) {
      const t0 = performance.now();
      const encoder = device.createCommandEncoder();
      encoder.copyBufferToBuffer(a, 0, b, 0, size);
      device.queue.submit([encoder.finish()]);
      await device.queue.onSubmittedWorkDone();
      if (i > 0) times.push(performance.now() - t0); // the first warms up
    }
    a.destroy();
    b.destroy();
    this.copyBandwidth = (2 * size) / (median(times) / 1e3);
    return this.copyBandwidth;
  }
}

export function median(xs) {
  const s = xs.filter((x) => x !== null && Number.isFinite(x)).sort((a, b) => a - b);
  if (!s.length) return null;
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

// ---- reading the shader's own declarations, for the limits' lessons ----

const SIZE_OF = { f32: 4, u32: 4, i32: 4, 'atomic<u32>': 4, 'atomic<i32>': 4, f16: 2, 'vec2<f32>': 8, 'vec4<f32>': 16, vec2f: 8, vec4f: 16 };

/** Integer value of a WGSL expression that is a literal or a `const`
 * declared in `code`; null otherwise (then the driver checks it). */
function constValue(expr, code) {
  const e = expr.trim();
  const lit = /^(\d+)[ui]?$/.exec(e);
  if (lit) return Number(lit[1]);
  if (!/^[A-Za-z_]\w*$/.test(e)) return null;
  const decl = new RegExp(`\\b(?:const|override)\\s+${e}\\s*(?::\\s*\\w+\\s*)?=\\s*(\\d+)[ui]?\\s*;`).exec(code);
  return decl ? Number(decl[1]) : null;
}

/** The @workgroup_size of the shader as [x, y, z] (null parts unknown), or
 * null when there is none. Comments are removed first. */
export function workgroupSize(code) {
  const src = stripComments(code);
  const m = /@workgroup_size\s*\(([^)]*)\)/.exec(src);
  if (!m) return null;
  const parts = m[1].split(',').map((p) => p.trim()).filter(Boolean);
  const dims = [0, 1, 2].map((i) => (i < parts.length ? constValue(parts[i], src) : 1));
  return dims;
}

/** Bytes of var<workgroup> memory the shader declares (null if a size is
 * not a literal or const). */
export function workgroupBytes(code) {
  const src = stripComments(code);
  let total = 0;
  const re = /var\s*<\s*workgroup\s*>\s*\w+\s*:\s*(array\s*<\s*(.+?)\s*,\s*([^>]+?)\s*>|[\w<>]+)\s*;/g;
  for (const m of src.matchAll(re)) {
    if (m[2]) {
      const n = constValue(m[3], src);
      const el = SIZE_OF[m[2].replace(/\s+/g, '')];
      if (n === null || !el) return null;
      total += n * el;
    } else {
      const el = SIZE_OF[m[1].replace(/\s+/g, '')];
      if (!el) return null;
      total += el;
    }
  }
  return total;
}

export function stripComments(code) {
  // Line comments and (non-nested) block comments, kept as spaces so that
  // offsets still match the source.
  return code.replace(/\/\*[\s\S]*?\*\/|\/\/[^\n]*/g, (c) => c.replace(/[^\n]/g, ' '));
}

/** The lesson's explanation when the shader or the launch asks for more
 * than the device allows; null when within the limits (or unknown). */
export function limitProblem(gpu, code, count) {
  const size = workgroupSize(code);
  if (size && size.every((d) => d !== null)) {
    const total = size[0] * size[1] * size[2];
    const max = gpu.limit('maxComputeInvocationsPerWorkgroup');
    if (total > max) {
      return (
        `@workgroup_size(${size.join(', ')}) asks for ${total} invocations in one workgroup, and this device runs at most ${max} ` +
        `(maxComputeInvocationsPerWorkgroup). This is WebGPU's form of CUDA's limit of 1024 threads per block: a workgroup, ` +
        `like a block, runs on one compute unit and shares its workgroup memory there, so its size is bounded by the hardware. ` +
        `Keep the workgroup at most ${max} invocations and cover the data with more workgroups (exercise "enough workgroups") ` +
        `or with a loop (exercise "grid-stride loop").`
      );
    }
    const axes = ['X', 'Y', 'Z'];
    for (let i = 0; i < 3; i++) {
      const m = gpu.limit(`maxComputeWorkgroupSize${axes[i]}`);
      if (size[i] > m) {
        return `@workgroup_size has ${size[i]} along ${axes[i].toLowerCase()}, and this device allows at most ${m} there (maxComputeWorkgroupSize${axes[i]}), as CUDA bounds blockDim.z at 64. Put the larger extent on x, or use fewer invocations.`;
      }
    }
  }
  const bytes = workgroupBytes(code);
  const maxBytes = gpu.limit('maxComputeWorkgroupStorageSize');
  if (bytes !== null && bytes > maxBytes) {
    return (
      `The shader declares ${bytes} bytes of var<workgroup> memory, and this device gives a workgroup at most ${maxBytes} ` +
      `(maxComputeWorkgroupStorageSize), as CUDA gives a block 48 KiB of shared memory by default. Use fewer bins or a smaller tile.`
    );
  }
  if (count) {
    const maxCount = gpu.limit('maxComputeWorkgroupsPerDimension');
    const over = count.findIndex((c) => c > maxCount);
    if (over >= 0) {
      return (
        `The launch asks for ${count[over]} workgroups along ${'xyz'[over]}, and this device allows at most ${maxCount} per dimension ` +
        `(maxComputeWorkgroupsPerDimension), like CUDA's grid limit of 65535 blocks in y and z. Launch fewer workgroups ` +
        `and let each invocation handle several elements (a grid-stride loop), or spread the workgroups over two dimensions.`
      );
    }
    if (count.some((c) => !Number.isInteger(c) || c < 0)) {
      return `The number of workgroups must be whole and not negative (got ${count.join(', ')}): use ceil(...) in the formula.`;
    }
  }
  return null;
}

// ---- the launch size from the form's formula ----

const FORMULA = /^[\s\d.+\-*/(),]*$/;
const NAMES = new Set(['n', 'width', 'height', 'ceil', 'floor', 'min', 'max']);

/** The workgroup counts [x, y, z] of a formula such as
 * "ceil(n / 256)" or "ceil(width / 16), ceil(height / 16)", with `vars`
 * {n, width, height}. Only numbers, + - * / ( ), those names and commas
 * are allowed, so the text cannot run anything else. */
export function workgroupCount(formula, vars) {
  const words = formula.match(/[A-Za-z_]\w*/g) ?? [];
  const unknown = words.find((w) => !NAMES.has(w));
  if (unknown || !FORMULA.test(formula.replace(/[A-Za-z_]\w*/g, ''))) {
    throw new LabError('dispatch', `The workgroups formula "${formula}" may use numbers, + - * / ( ), n, width, height, ceil, floor, min, max and commas between x, y, z${unknown ? ` (not "${unknown}")` : ''}.`);
  }
  let values;
  try {
    // eslint-disable-next-line no-new-func -- the text is restricted above
    values = new Function('n', 'width', 'height', 'ceil', 'floor', 'min', 'max', `return [${formula}];`)(
      vars.n, vars.width, vars.height, Math.ceil, Math.floor, Math.min, Math.max,
    );
  } catch (e) {
    throw new LabError('dispatch', `The workgroups formula "${formula}" does not parse: ${e.message}.`);
  }
  if (values.length < 1 || values.length > 3 || values.some((v) => typeof v !== 'number' || !Number.isFinite(v))) {
    throw new LabError('dispatch', `The workgroups formula "${formula}" must give one to three finite numbers (x, y, z); it gave ${values.join(', ')}.`);
  }
  while (values.length < 3) values.push(1);
  return values;
}
