// Vite bundles CSS imported by the entry module.
declare module "*.css";
