/** Browser bundle entry (dist/browser/arclight-client.js, served to the playground). */
export * from './index.ts';
