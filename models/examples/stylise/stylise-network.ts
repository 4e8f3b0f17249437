/**
 * The `stylise` example's network, built as ONNX bytes in code: no download, no Python, no onnx
 * package — a minimal protobuf writer and designed (not trained) weights, so the same bytes come
 * out on every machine.
 *
 * Graph (opset 17, dynamic H and W):
 * ```
 * image  float32 [1,3,H,W] in 0–1      strength float32 [1]
 *   Conv 3×3, 3→7, pad 1   blur of R, G, B; Sobel ±x, ±y of the luma       "features"
 *   Relu                   edges become their positive halves
 *   Conv 3×3, 7→3, pad 1   colour grade (saturation ×1.5, warm) of the blur, minus the edges
 *                          spread over 3×3 (ink lines)                      "graded"
 *   Relu, Mul 5, Floor, Add 0.5, Div 5          posterise to 5 levels       "style"
 *   stylised = Clip(image + strength · (style − image), 0, 1)   (Sub, Mul, Add, Clip)
 * ```
 * At strength 0 the output is the input, bit for bit; at 1 a flat-shaded, saturated, outlined picture.
 *
 * Write the file for a look in Netron or onnx.checker:
 * `node --import tsx models/examples/stylise/write-network.ts stylise.onnx`.
 */

/** Input and output names of the network. */
export const STYLISE_IO = { image: 'image', strength: 'strength', output: 'stylised' } as const;

/** Posterise levels per channel. */
export const POSTERISE_LEVELS = 5;

const OPSET = 17;
const IR_VERSION = 8;

// ---------------------------------------------------------------------------------------------
// Protobuf wire format: just what ONNX's messages need (varints, length-delimited, fixed32).

const WIRE_VARINT = 0;
const WIRE_LENGTH_DELIMITED = 2;
const WIRE_FIXED32 = 5;

class ProtoWriter {
  readonly #chunks: Uint8Array[] = [];
  #length = 0;

  #push(bytes: Uint8Array): void {
    this.#chunks.push(bytes);
    this.#length += bytes.length;
  }

  #rawVarint(value: number): void {
    if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`varint out of range: ${value}`);
    const bytes: number[] = [];
    let rest = value;
    while (rest >= 0x80) {
      bytes.push((rest % 0x80) | 0x80);
      rest = Math.floor(rest / 0x80);
    }
    bytes.push(rest);
    this.#push(Uint8Array.from(bytes));
  }

  #tag(field: number, wireType: number): void {
    this.#rawVarint(field * 8 + wireType);
  }

  /** int32/int64/enum field (non-negative values only: nothing here needs more). */
  varint(field: number, value: number): this {
    this.#tag(field, WIRE_VARINT);
    this.#rawVarint(value);
    return this;
  }

  float(field: number, value: number): this {
    this.#tag(field, WIRE_FIXED32);
    const bytes = new Uint8Array(4);
    new DataView(bytes.buffer).setFloat32(0, value, true);
    this.#push(bytes);
    return this;
  }

  bytes(field: number, value: Uint8Array): this {
    this.#tag(field, WIRE_LENGTH_DELIMITED);
    this.#rawVarint(value.length);
    this.#push(value);
    return this;
  }

  string(field: number, value: string): this {
    return this.bytes(field, new TextEncoder().encode(value));
  }

  message(field: number, write: (writer: ProtoWriter) => void): this {
    const inner = new ProtoWriter();
    write(inner);
    return this.bytes(field, inner.finish());
  }

  finish(): Uint8Array {
    const out = new Uint8Array(this.#length);
    let offset = 0;
    for (const chunk of this.#chunks) {
      out.set(chunk, offset);
      offset += chunk.length;
    }
    return out;
  }
}

// ---------------------------------------------------------------------------------------------
// ONNX messages (field numbers from onnx/onnx.proto). onnx.proto is proto2: repeated scalars are
// written unpacked, one field per value, except TensorProto's data, which is raw_data here.

const TENSOR_FLOAT = 1;
const ATTRIBUTE_INTS = 7;

interface Attribute {
  readonly name: string;
  readonly ints: readonly number[];
}

interface OnnxNode {
  readonly op: string;
  readonly inputs: readonly string[];
  readonly output: string;
  readonly attributes?: readonly Attribute[];
}

interface Initializer {
  readonly name: string;
  readonly dims: readonly number[];
  readonly values: Float32Array;
}

/** TensorProto: dims 1, data_type 2, name 8, raw_data 9 (little-endian). */
function writeTensor(w: ProtoWriter, { name, dims, values }: Initializer): void {
  if (values.length !== dims.reduce((a, b) => a * b, 1))
    throw new RangeError(`initializer ${name}: ${values.length} values for dims ${dims.join('x')}`);
  for (const dim of dims) w.varint(1, dim);
  w.varint(2, TENSOR_FLOAT);
  w.string(8, name);
  const raw = new Uint8Array(values.length * 4);
  const view = new DataView(raw.buffer);
  values.forEach((v, i) => view.setFloat32(i * 4, v, true));
  w.bytes(9, raw);
}

/** NodeProto: input 1, output 2, name 3, op_type 4, attribute 5 (AttributeProto: name 1, ints 8, type 20). */
function writeNode(w: ProtoWriter, node: OnnxNode): void {
  for (const input of node.inputs) w.string(1, input);
  w.string(2, node.output);
  w.string(3, node.output);
  w.string(4, node.op);
  for (const attribute of node.attributes ?? []) {
    w.message(5, (a) => {
      a.string(1, attribute.name);
      for (const v of attribute.ints) a.varint(8, v);
      a.varint(20, ATTRIBUTE_INTS);
    });
  }
}

/** ValueInfoProto: name 1, type 2 → TypeProto.tensor_type 1 → elem_type 1, shape 2 → dim 1 → dim_value 1 | dim_param 2. */
function writeValueInfo(w: ProtoWriter, name: string, shape: readonly (number | string)[]): void {
  w.string(1, name);
  w.message(2, (type) =>
    type.message(1, (tensor) => {
      tensor.varint(1, TENSOR_FLOAT);
      tensor.message(2, (s) => {
        for (const dim of shape) s.message(1, (d) => (typeof dim === 'number' ? d.varint(1, dim) : d.string(2, dim)));
      });
    }),
  );
}

// ---------------------------------------------------------------------------------------------
// The weights.

const LUMA = [0.299, 0.587, 0.114] as const;
const BLUR = [1, 2, 1, 2, 4, 2, 1, 2, 1].map((v) => v / 16);
const SOBEL_X = [-1, 0, 1, -2, 0, 2, -1, 0, 1];
const SOBEL_Y = [-1, -2, -1, 0, 0, 0, 1, 2, 1];
/** How dark an edge draws: the Sobel response (up to 4 for a black/white step) times this. */
const INK = 0.9;
const SATURATION = 1.5;
/** Warm cast: R, G, B gains after saturation. */
const WARMTH = [1.08, 1.0, 0.86] as const;

/** Conv 1: [7, 3, 3, 3]: out 0–2 blur R, G, B; out 3–6 luma Sobel +x, −x, +y, −y. */
function firstConv(): { weights: Float32Array; bias: Float32Array } {
  const weights = new Float32Array(7 * 3 * 9);
  const set = (out: number, inChannel: number, kernel: readonly number[], gain: number) => {
    kernel.forEach((k, i) => (weights[(out * 3 + inChannel) * 9 + i] = k * gain));
  };
  for (let c = 0; c < 3; c++) set(c, c, BLUR, 1);
  const edges = [
    [SOBEL_X, 1],
    [SOBEL_X, -1],
    [SOBEL_Y, 1],
    [SOBEL_Y, -1],
  ] as const;
  edges.forEach(([kernel, sign], e) => {
    for (let c = 0; c < 3; c++) set(3 + e, c, kernel, sign * LUMA[c]!);
  });
  return { weights, bias: new Float32Array(7) };
}

/**
 * Conv 2: [3, 7, 3, 3]: each output colour = graded blur (centre tap: saturation matrix × warmth)
 * minus INK × the four edge halves averaged over 3×3 (so lines are a little thicker than the edge).
 */
function secondConv(): { weights: Float32Array; bias: Float32Array } {
  const weights = new Float32Array(3 * 7 * 9);
  const centre = 4;
  for (let out = 0; out < 3; out++) {
    for (let c = 0; c < 3; c++) {
      const saturate = (out === c ? SATURATION : 0) + (1 - SATURATION) * LUMA[c]!;
      weights[(out * 7 + c) * 9 + centre] = saturate * WARMTH[out]!;
    }
    for (let e = 3; e < 7; e++) {
      for (let i = 0; i < 9; i++) weights[(out * 7 + e) * 9 + i] = -INK / 9;
    }
  }
  return { weights, bias: Float32Array.from([0.02, 0.0, -0.02]) };
}

// ---------------------------------------------------------------------------------------------

/** The network's ModelProto bytes; the same bytes every call, on every machine. */
export function buildStyliseNetwork(): Uint8Array {
  const conv1 = firstConv();
  const conv2 = secondConv();
  const scalar = (name: string, value: number): Initializer => ({ name, dims: [], values: Float32Array.of(value) });
  const initializers: Initializer[] = [
    { name: 'conv1.weight', dims: [7, 3, 3, 3], values: conv1.weights },
    { name: 'conv1.bias', dims: [7], values: conv1.bias },
    { name: 'conv2.weight', dims: [3, 7, 3, 3], values: conv2.weights },
    { name: 'conv2.bias', dims: [3], values: conv2.bias },
    scalar('levels', POSTERISE_LEVELS),
    scalar('half', 0.5),
    scalar('zero', 0),
    scalar('one', 1),
  ];
  const conv = [
    { name: 'kernel_shape', ints: [3, 3] },
    { name: 'pads', ints: [1, 1, 1, 1] },
  ];
  const { image, strength, output } = STYLISE_IO;
  const nodes: OnnxNode[] = [
    { op: 'Conv', inputs: [image, 'conv1.weight', 'conv1.bias'], output: 'features', attributes: conv },
    { op: 'Relu', inputs: ['features'], output: 'features_relu' },
    { op: 'Conv', inputs: ['features_relu', 'conv2.weight', 'conv2.bias'], output: 'graded', attributes: conv },
    { op: 'Relu', inputs: ['graded'], output: 'graded_relu' },
    { op: 'Mul', inputs: ['graded_relu', 'levels'], output: 'scaled' },
    { op: 'Floor', inputs: ['scaled'], output: 'stepped' },
    { op: 'Add', inputs: ['stepped', 'half'], output: 'centred' },
    { op: 'Div', inputs: ['centred', 'levels'], output: 'style' },
    { op: 'Sub', inputs: ['style', image], output: 'difference' },
    { op: 'Mul', inputs: ['difference', strength], output: 'weighted' },
    { op: 'Add', inputs: [image, 'weighted'], output: 'blended' },
    { op: 'Clip', inputs: ['blended', 'zero', 'one'], output },
  ];

  const model = new ProtoWriter();
  model.varint(1, IR_VERSION);
  model.string(2, 'arclight-stylise-network');
  model.string(3, '1');
  model.message(7, (graph) => {
    for (const node of nodes) graph.message(1, (n) => writeNode(n, node));
    graph.string(2, 'stylise');
    for (const init of initializers) graph.message(5, (t) => writeTensor(t, init));
    graph.string(10, 'Cartoon look: blur, saturation and warmth, ink edges, 5-level posterise; blended with the input by strength.');
    graph.message(11, (v) => writeValueInfo(v, image, [1, 3, 'H', 'W']));
    graph.message(11, (v) => writeValueInfo(v, strength, [1]));
    graph.message(12, (v) => writeValueInfo(v, output, [1, 3, 'H', 'W']));
  });
  model.message(8, (opset) => opset.string(1, '').varint(2, OPSET));
  return model.finish();
}
