/** The console's router: the shared one (ui-shared/router.tsx), based at /console. */
import { setBase } from "../../ui-shared/router.tsx";

setBase("/console");

export { href, Link, match, navigate, setSearch, useLocation } from "../../ui-shared/router.tsx";
