/** Test media: the generators of src/storage/samples.ts (also behind `backline media samples`). */
export * from "../../src/storage/samples.ts";
