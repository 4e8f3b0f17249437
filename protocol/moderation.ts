/**
 * Moderation, where it crosses a wire: the schema keyword that opts a free-text command parameter
 * in (it travels inside the command's params schema in capabilities and `GET /schema`, so a
 * client can see which fields are checked), and the JSON a runtime exchanges with an HTTP
 * moderation service (`arclight serve --moderator-url`). docs/model-authors.md "Moderation".
 */

/**
 * A string property whose schema carries `"x-arclight-moderated": true` is checked by the
 * runtime's moderator before the command runs. Absent or `false`: never checked.
 */
export const MODERATED_KEYWORD = 'x-arclight-moderated';

/** `POST <moderator URL>` body. */
export interface ModerationCheckRequest {
  readonly session_id: string;
  readonly command: string;
  /** The command's moderated parameters that are present and not blank, by JSON pointer into its data: `{"/prompt": "a cat"}`. */
  readonly fields: Readonly<Record<string, string>>;
}

/** The moderation service's answer: 2xx with this JSON. */
export interface ModerationCheckResponse {
  readonly allowed: boolean;
  /** Why not; shown to the client in the failure's message. */
  readonly reason?: string;
  /** The moderator's own classification (e.g. `violence`); shown to the client in the message. */
  readonly category?: string;
  /** Which of the request's `fields` was at fault (a key of `fields`); becomes the failure's `field`. */
  readonly field?: string;
}

export const moderationCheckResponseSchema = {
  $id: 'arclight:moderation_check_response',
  type: 'object',
  required: ['allowed'],
  properties: {
    allowed: { type: 'boolean' },
    reason: { type: 'string', maxLength: 1024 },
    category: { type: 'string', maxLength: 128 },
    field: { type: 'string', maxLength: 1024 },
  },
} as const;
