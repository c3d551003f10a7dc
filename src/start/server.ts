// `npm start`: the API (and, once they exist, the workers) in one process.
import { createLogger, die, loadConfigOrDie } from "./process.ts";
import { serveUntilSignalled } from "./serve.ts";

const config = loadConfigOrDie();
const logger = createLogger(config);
serveUntilSignalled(config, logger).catch(die);
