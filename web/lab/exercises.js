// The lab's exercises, ported from the CUDA/CuPy GPU workshop to WGSL.
// Each one: a lesson (HTML), starter code that fails its check in a way the
// lesson explains, a solution, the CuPy RawKernel form, and `prepare`,
// which turns the input ({data: Float32Array, shape, source}) into the
// buffers the shader declares, the CPU reference and the check's rule.
//
// Bindings are declared by the exercise (the explicit layout of the
// pipeline), so the student's shader must declare the same ones; leaving
// one unused is fine.
import { IMAGE_EXERCISES } from './exercises-image.js';

const f32 = (xs) => Float32Array.from(xs);
const u32 = (xs) => Uint32Array.from(xs);

/** The second operand of the vector adds: exact quarters, never 0 (so an
 * element nobody wrote is wrong), so that an f32 sum is exact and the
 * check can be. */
function second(n) {
  const b = new Float32Array(n);
  for (let i = 0; i < n; i++) b[i] = ((i * 7) % 100) / 4 + 0.25;
  return b;
}

function vectorAdd(input) {
  const a = f32(input.data);
  const n = a.length;
  const b = second(n);
  return {
    n,
    bindings: [
      { binding: 0, name: 'a', kind: 'read', data: a },
      { binding: 1, name: 'b', kind: 'read', data: b },
      { binding: 2, name: 'c', kind: 'rw', data: new Float32Array(n) },
      { binding: 3, name: 'params', kind: 'uniform', data: u32([n]) },
    ],
    out: { binding: 2, type: 'f32', length: n },
    reference: () => {
      const c = new Float32Array(n);
      for (let i = 0; i < n; i++) c[i] = a[i] + b[i];
      return c;
    },
    rule: { exact: true },
    bytes: 12 * n,
  };
}

const VADD_HEAD = `struct Params { n: u32 }

@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;
`;

const VADD_CUPY_HEAD = `import cupy as cp

n = 200
a = cp.random.randint(0, 256, n).astype(cp.float32)
b = (cp.arange(n) * 7 % 100 / 4 + 0.25).astype(cp.float32)
c = cp.zeros_like(a)
`;

const VADD_GRID_WGSL = `${VADD_HEAD}
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
  // The global index: workgroup_id.x * 256 + local_invocation_id.x,
  // CUDA's blockIdx.x * blockDim.x + threadIdx.x.
  let i = id.x;
  // The last workgroup runs past n when n is not a multiple of 256.
  if (i >= params.n) {
    return;
  }
  c[i] = a[i] + b[i];
}
`;

const VECTOR = [
  {
    id: 'vadd-one',
    title: 'Vector add: one workgroup',
    inputs: ['array', 'image'],
    defaultN: 200,
    workgroups: '1',
    fixedWorkgroups: true,
    lesson: `<p>Each invocation (CUDA: thread) adds one pair: <code>c[i] = a[i] + b[i]</code>. Here the launch is
      <b>one workgroup</b> (CUDA: one block), so the workgroup must have an invocation for every element.</p>
      <p>The starter's workgroup has 64 invocations for 200 elements: run it and the check names the elements no one
      computed. Make the workgroup large enough. Then set n to 2000 and try a workgroup that large: the device refuses,
      as CUDA refuses more than 1024 threads per block. The next exercise lifts the limit.</p>
      <p>Check: exact (one f32 addition rounds the same on every device).</p>`,
    starter: `${VADD_HEAD}
@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) i: u32) {
  // i is this invocation's index in its workgroup (CUDA: threadIdx.x).
  if (i < params.n) {
    c[i] = a[i] + b[i];
  }
}
`,
    solution: `${VADD_HEAD}
// One invocation per element: 256 covers n = 200 (and is at most the
// device's maxComputeInvocationsPerWorkgroup, at least 256 everywhere).
@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) i: u32) {
  if (i < params.n) {
    c[i] = a[i] + b[i];
  }
}
`,
    cupy: `${VADD_CUPY_HEAD}
vector_add = cp.RawKernel(r'''
extern "C" __global__
void vector_add(const float* a, const float* b, float* c, int n) {
    int i = threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
''', 'vector_add')

vector_add((1,), (256,), (a, b, c, cp.int32(n)))  # one block of 256 threads
assert cp.array_equal(c, a + b)
`,
    prepare: vectorAdd,
  },
  {
    id: 'vadd-grid',
    title: 'Vector add: enough workgroups',
    inputs: ['array', 'image'],
    defaultN: 5000,
    workgroups: 'ceil(n / 256)',
    lesson: `<p>To add vectors of any length, launch <b>many workgroups</b> (CUDA: a grid of blocks) of 256 invocations,
      <code>ceil(n / 256)</code> of them (the formula under the editor). Each invocation must then work on its
      <em>global</em> index, not its index within the workgroup.</p>
      <p>The starter makes the classic mistake: it uses <code>local_invocation_id.x</code> (CUDA <code>threadIdx.x</code>),
      so every workgroup writes the first 256 elements. Use <code>global_invocation_id.x</code>
      (<code>blockIdx.x * blockDim.x + threadIdx.x</code>), and keep the guard <code>i &lt; n</code>: the last
      workgroup is only partly needed. Without the guard its writes fall outside <code>c</code>; WebGPU's robustness keeps
      them inside the buffer (they may land on another element) where CUDA would corrupt memory.</p>
      <p>Try an n that needs more than the device's workgroups per dimension (see the limits): the lab explains the
      next exercise's answer.</p>`,
    starter: `${VADD_HEAD}
@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3<u32>) {
  let i = lid.x;
  if (i < params.n) {
    c[i] = a[i] + b[i];
  }
}
`,
    solution: VADD_GRID_WGSL,
    cupy: `${VADD_CUPY_HEAD.replace('n = 200', 'n = 5000')}
vector_add = cp.RawKernel(r'''
extern "C" __global__
void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
''', 'vector_add')

threads = 256
blocks = (n + threads - 1) // threads
vector_add((blocks,), (threads,), (a, b, c, cp.int32(n)))
assert cp.array_equal(c, a + b)
`,
    prepare: vectorAdd,
  },
  {
    id: 'vadd-stride',
    title: 'Vector add: grid-stride loop',
    inputs: ['array', 'image'],
    defaultN: 20000,
    workgroups: '4',
    fixedWorkgroups: true,
    lesson: `<p>A launch need not have one invocation per element. With a <b>grid-stride loop</b> a fixed number of
      workgroups (here 4, fixed) covers any n: invocation <code>i</code> handles <code>i</code>,
      <code>i + stride</code>, <code>i + 2·stride</code>, … where <code>stride</code> is the number of invocations in
      the launch, <code>num_workgroups.x * 256</code> (CUDA: <code>gridDim.x * blockDim.x</code>).</p>
      <p>The starter is the previous solution: with 4 workgroups it computes only the first 1024 elements. Add the
      loop. This is also the answer to the workgroups-per-dimension limit, and it lets a launch be sized to the GPU
      (a few workgroups per compute unit) rather than to the data.</p>`,
    starter: VADD_GRID_WGSL,
    solution: `${VADD_HEAD}
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
  // Every invocation of the launch, CUDA's gridDim.x * blockDim.x.
  let stride = groups.x * 256u;
  for (var i = id.x; i < params.n; i += stride) {
    c[i] = a[i] + b[i];
  }
}
`,
    cupy: `${VADD_CUPY_HEAD.replace('n = 200', 'n = 20000')}
vector_add = cp.RawKernel(r'''
extern "C" __global__
void vector_add(const float* a, const float* b, float* c, int n) {
    int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        c[i] = a[i] + b[i];
}
''', 'vector_add')

vector_add((4,), (256,), (a, b, c, cp.int32(n)))  # 4 blocks, any n
assert cp.array_equal(c, a + b)
`,
    prepare: vectorAdd,
  },
  {
    id: 'primes',
    title: 'Primes up to a bound',
    inputs: ['array'],
    defaultN: 10000,
    workgroups: 'ceil(n / 256)',
    lesson: `<p>Mark every number below the bound n: <code>is_prime[i] = 1</code> when i is prime, else 0. One invocation
      per number, each doing <b>trial division</b> by d = 2, 3, … while d·d ≤ i. The CPU reference is a sieve.</p>
      <p>The starter calls every number from 2 up prime. Write the loop. Work per invocation now varies (a prime
      needs √i divisions, an even number one): a GPU runs the invocations of a subgroup in lockstep, so the slowest
      sets the pace.</p>
      <p><b>Loop cap.</b> A loop that never ends would hang the GPU until the browser resets it. Bound every loop by
      <code>params.max_iter</code> (here 65536); if a kernel still runs for 20 s, the lab destroys the device, makes a
      new one and says so.</p>`,
    starter: `struct Params { n: u32, max_iter: u32 }

@group(0) @binding(0) var<storage, read_write> is_prime: array<u32>;
@group(0) @binding(1) var<uniform> params: Params;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
  let i = id.x;
  if (i >= params.n) {
    return;
  }
  // TODO: trial division. For now every number from 2 up is called prime.
  let prime = i >= 2u;
  is_prime[i] = select(0u, 1u, prime);
}
`,
    solution: `struct Params { n: u32, max_iter: u32 }

@group(0) @binding(0) var<storage, read_write> is_prime: array<u32>;
@group(0) @binding(1) var<uniform> params: Params;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
  let i = id.x;
  if (i >= params.n) {
    return;
  }
  var prime = i >= 2u;
  var d = 2u;
  // max_iter bounds the loop whatever the bound test says.
  for (var k = 0u; k < params.max_iter && d * d <= i; k++) {
    if (i % d == 0u) {
      prime = false;
      break;
    }
    d++;
  }
  is_prime[i] = select(0u, 1u, prime);
}
`,
    cupy: `import cupy as cp

n = 10000
is_prime = cp.zeros(n, dtype=cp.uint32)

primes = cp.RawKernel(r'''
extern "C" __global__
void primes(unsigned int* is_prime, unsigned int n, unsigned int max_iter) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    bool prime = i >= 2;
    unsigned int d = 2;
    for (unsigned int k = 0; k < max_iter && d * d <= i; k++, d++)
        if (i % d == 0) { prime = false; break; }
    is_prime[i] = prime;
}
''', 'primes')

primes(((n + 255) // 256,), (256,), (is_prime, cp.uint32(n), cp.uint32(65536)))
print(int(is_prime.sum()), 'primes below', n)
`,
    prepare: (input) => {
      const n = input.data.length;
      return {
        n,
        bindings: [
          { binding: 0, name: 'is_prime', kind: 'rw', data: new Uint32Array(n) },
          { binding: 1, name: 'params', kind: 'uniform', data: u32([n, 65536]) },
        ],
        out: { binding: 0, type: 'u32', length: n },
        reference: () => sieve(n),
        rule: { exact: true },
        summary: (got, want) => `The kernel found ${count(got)} primes below ${n}; there are ${count(want)}.`,
        bytes: 4 * n,
      };
    },
  },
  {
    id: 'reduce',
    title: 'Reduction: sum and max',
    inputs: ['array', 'image'],
    defaultN: 10000,
    workgroups: 'ceil(n / 256)',
    fixedWorkgroups: true,
    lesson: `<p>A <b>reduction</b> combines n values into one. On a GPU it runs as a tree: each workgroup loads 256
      values into <code>var&lt;workgroup&gt;</code> memory (CUDA: <code>__shared__</code>), then halves the number of
      active invocations at each step, <code>workgroupBarrier()</code> (CUDA: <code>__syncthreads()</code>) between
      steps, and writes one partial result. The few partials are then combined by a second launch or, here, by the
      CPU.</p>
      <p>Workgroup k reduces elements 256·k … 256·k + 255 and writes its sum to <code>partial[2k]</code> and its
      maximum to <code>partial[2k + 1]</code>. The starter does the sum; add the maximum (elements past n count as
      −3.4e38 for it).</p>
      <p>Check: every partial within 1e-5 of the largest partial (f32 sums in a tree differ from the CPU's f64
      loop by rounding; a maximum is one of the inputs, so it comes out exact).</p>`,
    starter: `struct Params { n: u32 }

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> partial: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

const WG = 256u;
var<workgroup> sums: array<f32, WG>;
var<workgroup> maxs: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32,
        @builtin(workgroup_id) wid: vec3<u32>) {
  let i = wid.x * WG + lid;
  var v = 0.0;
  if (i < params.n) {
    v = x[i];
  }
  sums[lid] = v;
  workgroupBarrier();
  // Halve the active invocations each step; the barrier makes the writes
  // of one step visible to the reads of the next.
  for (var s = WG / 2u; s > 0u; s = s / 2u) {
    if (lid < s) {
      sums[lid] = sums[lid] + sums[lid + s];
    }
    workgroupBarrier();
  }
  if (lid == 0u) {
    partial[2u * wid.x] = sums[0];
    partial[2u * wid.x + 1u] = 0.0; // TODO: this workgroup's maximum
  }
}
`,
    solution: `struct Params { n: u32 }

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> partial: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

const WG = 256u;
var<workgroup> sums: array<f32, WG>;
var<workgroup> maxs: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32,
        @builtin(workgroup_id) wid: vec3<u32>) {
  let i = wid.x * WG + lid;
  var v = 0.0;
  var m = -3.4e38; // below every f32 value but -inf
  if (i < params.n) {
    v = x[i];
    m = x[i];
  }
  sums[lid] = v;
  maxs[lid] = m;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s = s / 2u) {
    if (lid < s) {
      sums[lid] = sums[lid] + sums[lid + s];
      maxs[lid] = max(maxs[lid], maxs[lid + s]);
    }
    workgroupBarrier();
  }
  if (lid == 0u) {
    partial[2u * wid.x] = sums[0];
    partial[2u * wid.x + 1u] = maxs[0];
  }
}
`,
    cupy: `import cupy as cp

n = 10000
x = cp.random.randint(0, 256, n).astype(cp.float32)
blocks = (n + 255) // 256
partial = cp.zeros(2 * blocks, dtype=cp.float32)

reduce = cp.RawKernel(r'''
extern "C" __global__
void reduce(const float* x, float* partial, int n) {
    __shared__ float sums[256], maxs[256];
    int lid = threadIdx.x, i = blockIdx.x * 256 + lid;
    sums[lid] = i < n ? x[i] : 0.0f;
    maxs[lid] = i < n ? x[i] : -3.4e38f;
    __syncthreads();
    for (int s = 128; s > 0; s /= 2) {
        if (lid < s) {
            sums[lid] += sums[lid + s];
            maxs[lid] = fmaxf(maxs[lid], maxs[lid + s]);
        }
        __syncthreads();
    }
    if (lid == 0) { partial[2 * blockIdx.x] = sums[0]; partial[2 * blockIdx.x + 1] = maxs[0]; }
}
''', 'reduce')

reduce((blocks,), (256,), (x, partial, cp.int32(n)))
print(float(partial[0::2].sum()), float(partial[1::2].max()), float(x.sum()), float(x.max()))
`,
    prepare: (input) => {
      const x = f32(input.data);
      const n = x.length;
      const groups = Math.ceil(n / 256);
      return {
        n,
        bindings: [
          { binding: 0, name: 'x', kind: 'read', data: x },
          { binding: 1, name: 'partial', kind: 'rw', data: new Float32Array(2 * groups) },
          { binding: 2, name: 'params', kind: 'uniform', data: u32([n]) },
        ],
        out: { binding: 1, type: 'f32', length: 2 * groups },
        reference: () => {
          const p = new Float64Array(2 * groups);
          for (let g = 0; g < groups; g++) {
            let s = 0;
            let m = -Infinity;
            for (let i = g * 256; i < Math.min(n, g * 256 + 256); i++) {
              s += x[i];
              m = Math.max(m, x[i]);
            }
            p[2 * g] = s;
            p[2 * g + 1] = m;
          }
          return p;
        },
        rule: { rtol: 1e-5 },
        names: (i) => `workgroup ${i >> 1} ${i % 2 ? 'max' : 'sum'}`,
        summary: (got) => {
          let s = 0;
          let m = -Infinity;
          for (let g = 0; g < groups; g++) {
            s += got[2 * g];
            m = Math.max(m, got[2 * g + 1]);
          }
          let rs = 0;
          let rm = -Infinity;
          for (const v of x) {
            rs += v;
            rm = Math.max(rm, v);
          }
          return `Combining the ${groups} partials on the CPU: sum ${s}, max ${m} (CPU over all n: sum ${rs}, max ${rm}).`;
        },
        bytes: 4 * n,
      };
    },
  },
];

/** 1 where i is prime, for i < n (sieve of Eratosthenes). */
function sieve(n) {
  const p = new Uint32Array(n).fill(1);
  for (let i = 0; i < Math.min(2, n); i++) p[i] = 0;
  for (let i = 2; i * i < n; i++) if (p[i]) for (let j = i * i; j < n; j += i) p[j] = 0;
  return p;
}

function count(a) {
  let c = 0;
  for (const v of a) c += v;
  return c;
}

export const EXERCISES = [...VECTOR.slice(0, 4), ...IMAGE_EXERCISES, VECTOR[4]];

export const byId = (id) => EXERCISES.find((e) => e.id === id) ?? EXERCISES[0];
