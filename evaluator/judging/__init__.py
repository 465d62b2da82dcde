"""The deciding side: starts sandboxed judges, pools them (locally or on Ray) and reads their verdicts."""
