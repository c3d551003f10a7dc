import { useQuery } from "@tanstack/react-query";
import { duration, support } from "../api/support.ts";
import { Link } from "../router.tsx";

/**
 * The support desk's figures on the console's front page (the review queue): tickets open and
 * the median time to a first reply over 30 days, linking to the queue. Quiet when it cannot load
 * (the Support page says why).
 */
export function SupportSummary() {
  const stats = useQuery({ queryKey: ["tickets", "stats"], queryFn: support.stats, refetchInterval: 60_000 });
  const s = stats.data;
  if (!s) return null;
  return (
    <ul className="counts" aria-label="Support" data-testid="support-summary">
      <li>
        <span className="count" data-testid="support-summary-open">
          {s.open.toLocaleString()}
        </span>{" "}
        <Link to="/support?status=open">support tickets open</Link>
      </li>
      <li>
        <span className="count" data-testid="support-summary-median">
          {duration(s.median_first_reply_seconds)}
        </span>{" "}
        median first reply ({s.days} days)
      </li>
    </ul>
  );
}
