"""Draft Desk: decide whether an AI support-reply drafter is good enough to ship, and keep it honest."""
