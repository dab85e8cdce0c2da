/**
 * Amazon Nova Canvas on Bedrock Runtime: InvokeModel (`model/{modelId}/invoke`) of a model named
 * `amazon.nova-canvas-*` (its id, an inference profile's, an ARN's), which makes images billed per image by quality
 * and size (docs/modalities.md, "Amazon Nova Canvas"). Every other InvokeModel stays refused (bedrock.ts).
 *
 * Its request is the model's own JSON: a `taskType` and its parameters, and `imageGenerationConfig` (`numberOfImages`,
 * 1 to 5; `quality`, `standard` or `premium`; `width` and `height`). Its answer (`{ images: [base64...], error }`)
 * reports no usage and can be tens of megabytes: it is relayed as it comes, and the call charged its rule, the images
 * it asked for of the tier `{quality}/{size}`. The size is the price's class: `1024x1024` up to 1,048,576 pixels,
 * `2048x2048` above. A task whose output takes its input image's size (inpainting, outpainting, background removal,
 * virtual try-on), or a variation that names no size, is at the larger class.
 */
import { AppError } from '../errors.js';
import type { EndpointRows } from './index.js';
import type { PreparedCall } from './protocol.js';
import { jsonObjectOf } from './request-body.js';
import type { StreamReader } from './stream.js';
import type { Usage } from './usage.js';

const NOVA_CANVAS = /^model\/.*amazon\.nova-canvas[^/]*\/invoke$/i;

/** The tasks whose output size `imageGenerationConfig` sets, and the side they make where it names none (none: their input's). */
const SIZED_BY_CONFIG: Readonly<Record<string, number | undefined>> = {
  TEXT_IMAGE: 1024,
  COLOR_GUIDED_GENERATION: 1024,
  IMAGE_VARIATION: undefined,
};
const SMALL_CLASS = 1024 * 1024;
const MAX_IMAGES = 5;

const invalid = (param: string, message: string) => new AppError('invalid_parameter', message, { param });

/** A whole number of `config` in [min, max]; undefined when absent. */
function whole(config: Record<string, unknown>, field: string, min: number, max: number): number | undefined {
  const value = config[field];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max)
    throw invalid(`imageGenerationConfig.${field}`, `imageGenerationConfig.${field} must be a whole number from ${min} to ${max}`);
  return value;
}

/** The pixels of one output image at most: the config's width times height where its task takes them, else its class's. */
function areaOf(task: string, config: Record<string, unknown>): number {
  const width = whole(config, 'width', 320, 4096);
  const height = whole(config, 'height', 320, 4096);
  if (!Object.hasOwn(SIZED_BY_CONFIG, task)) return Infinity;
  const side = SIZED_BY_CONFIG[task];
  const w = width ?? side;
  const h = height ?? side;
  return w === undefined || h === undefined ? Infinity : w * h;
}

/** An InvokeModel request of Nova Canvas: its images and their tier, charged whatever its answer says. */
function readInvoke(raw: Buffer, _caps: unknown, routeModel: string | undefined): PreparedCall {
  const body = jsonObjectOf(raw);
  const task = body.taskType;
  if (typeof task !== 'string' || !task) throw invalid('taskType', 'taskType is required (TEXT_IMAGE, IMAGE_VARIATION, INPAINTING...)');
  const config = body.imageGenerationConfig ?? {};
  if (typeof config !== 'object' || config === null || Array.isArray(config))
    throw invalid('imageGenerationConfig', 'imageGenerationConfig must be an object');
  const fields = config as Record<string, unknown>;
  const quality = fields.quality ?? 'standard';
  if (quality !== 'standard' && quality !== 'premium')
    throw invalid('imageGenerationConfig.quality', 'imageGenerationConfig.quality must be standard or premium');
  // Background removal makes one image, whatever the config says.
  const images = BigInt(task === 'BACKGROUND_REMOVAL' ? 1 : (whole(fields, 'numberOfImages', 1, MAX_IMAGES) ?? 1));
  const kinds = { images, imageTier: `${quality}/${areaOf(task, fields) <= SMALL_CLASS ? '1024x1024' : '2048x2048'}` };
  const unreported: Usage = { inputTokens: 0n, cachedInputTokens: 0n, outputTokens: 0n, ...kinds };
  return {
    requestedModel: routeModel ?? '',
    stream: false,
    body: raw,
    inputBound: 0n,
    outputBound: 0n,
    outputCeiling: 0n,
    usageInjected: false,
    previousResponseId: null,
    outputCap: undefined,
    boundKinds: kinds,
    unreported,
  };
}

/** Nova Canvas does not stream (InvokeModelWithResponseStream stays refused): nothing of a stream is read. */
const NO_STREAM: StreamReader = {
  read() {},
  text: () => 0,
  forwarded() {},
  ending: () => '',
};

export const NOVA_CANVAS_ROWS: EndpointRows<'nova_canvas'> = {
  metered: [[NOVA_CANVAS, 'nova_canvas']],
  endpoints: {
    nova_canvas: {
      label: 'invoke (amazon.nova-canvas)',
      operation: 'image_generation',
      capFields: [],
      input() {
        throw new Error('Nova Canvas reads its own request');
      },
      read: readInvoke,
      stream: () => NO_STREAM,
      // Its JSON answer carries images and no usage: relayed as it comes, never held.
      answerRead: () => false,
    },
  },
};
