/**
 * `node --import arclight/register …` — lets plain Node import TypeScript (a model module, its
 * tests) through tsx's ESM hooks, the loader the runtime itself uses for model modules. A
 * project made by `arclight init` runs its tests this way: `node --import arclight/register --test`.
 */

import { register } from 'tsx/esm/api';

register();
