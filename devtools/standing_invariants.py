"""The chaos run's invariants of what an owner sets once for every later turn, checked after it over the database and
the double's state:
- standing instructions (docs/design.md §3 "Custom instructions"): a turn admitted after a change was acknowledged
  runs under those instructions or under a later change's, never under ones the change replaced (the words reach the
  provider as the agent's and its session's instructions, since neither can change there);
- standing permissions (docs/api.md "Tool approval"): a call of a tool its owner always allows, by a grant
  acknowledged before the call was recorded and not revoked since, is not asked; one recorded after a revocation
  was acknowledged, with no grant since, is asked.

Changes of one owner made at once (from two conversations) may land in either order, so a change counts as replaced
only by one sent after its acknowledgement. As in devtools/invariants.py, each check returns human-readable
violations instead of asserting."""

from collections import defaultdict

from devtools.invariants import CheckedRun
from devtools.records import InstructionsChange, PermissionChange
from rebyte.instructions import agent_instructions

# A call's record reads its owner's permission just after stamping its `created_at`: a change sent this close after
# may have landed before the read.
PERMISSION_READ_MARGIN_SECONDS = 1.0


def _by_user(changes: list) -> defaultdict:
    by_user = defaultdict(list)
    for change in changes:
        by_user[change.user.id].append(change)
    return by_user


def _not_replaced(changes: list, known: list) -> list:
    """The changes that may still hold: all but one another change in `known` was sent after it was acknowledged."""

    def replaced(change) -> bool:
        return change.acknowledged_at is not None and any(
            later.sent_at > change.acknowledged_at for later in known if later is not change
        )

    return [change for change in changes if not replaced(change)]


def instructions_a_turn_may_have(changes: list[InstructionsChange], admitted_at: float) -> set[str] | None:
    """The owner's instructions a turn admitted at `admitted_at` may start under: each change's words but those of a
    change known to be overwritten by then (another one was sent after its acknowledgement, and acknowledged before
    the admission). None while no change had been acknowledged: the instructions before the run began are unknown."""
    known = [change for change in changes if (change.acknowledged_at or admitted_at) < admitted_at]
    if not known:
        return None
    return {change.text for change in _not_replaced(changes, known)}


def check_instructions(chaos: CheckedRun, changes: list[InstructionsChange], double_state: dict) -> list[str]:
    """For each command whose turn reached the provider, the session it ran in (and that session's agent, while the
    double still has them) carries instructions a turn admitted when it was may have."""
    from rebyte.models import RemoteTurn
    from runtime.models import Run

    by_user = _by_user(changes)
    sessions = {session["id"]: session for session in double_state["sessions"]}
    agents = {agent["id"]: agent for agent in double_state["agents"]}
    violations = []
    for record in (record for record in chaos.records if by_user[record.user.id]):
        for command in record.commands:
            run = Run.objects.select_related("submission").get(submission_id=command.submission_id)
            allowed = instructions_a_turn_may_have(by_user[record.user.id], run.submission.created_at.timestamp())
            turn = RemoteTurn.objects.filter(run=run, session__isnull=False).select_related("session").first()
            session = sessions.get(turn.session.remote_id) if turn else None
            if allowed is None or session is None:
                continue  # admitted before any change was known, or its turn never reached a session it still has
            expected = {agent_instructions(text) for text in allowed}
            agent = agents.get(session["agent"]["id"])
            found = [session["agent"]["instructions"].split("\n\n## Session context\n")[0]]
            found += [agent["instructions"]] if agent else []
            if not set(found) <= expected:
                violations.append(
                    f"submission {command.submission_id}: ran in session {session['id']} under instructions "
                    f"{found!r}, admitted when only {sorted(allowed)!r} could hold"
                )
    return violations


def always_allowed_at(changes: list[PermissionChange], recorded_at: float) -> bool | None:
    """Whether a call recorded at `recorded_at` must find the tool always allowed (True), must be asked (False), or
    may be either (None: a change that could decide it was in flight)."""
    sent = [change for change in changes if change.sent_at < recorded_at + PERMISSION_READ_MARGIN_SECONDS]
    known = [change for change in sent if (change.acknowledged_at or recorded_at) < recorded_at]
    kinds = {change.kind for change in _not_replaced(sent, known)} | (set() if known else {"revoke"})  # none at first
    return {frozenset({"grant"}): True, frozenset({"revoke"}): False}.get(frozenset(kinds))


def check_permissions(chaos: CheckedRun, changes: list[PermissionChange], tool_name: str) -> list[str]:
    """Every call of `tool_name` by a command the client kept was asked or not as its owner's permission then said."""
    from tools.models import ToolApproval, ToolCall

    by_user = _by_user(changes)
    violations = []
    for record in chaos.records:
        submission_ids = [command.submission_id for command in record.commands]
        calls = ToolCall.objects.filter(run__submission_id__in=submission_ids, tool_name=tool_name)
        asked = set(ToolApproval.objects.filter(tool_call__in=calls).values_list("tool_call_id", flat=True))
        for call in calls:
            expected = always_allowed_at(by_user[record.user.id], call.created_at.timestamp())
            if expected is not None and expected == (call.id in asked):
                said = "asked although its owner always allowed it" if expected else "not asked, never allowed"
                violations.append(f"{tool_name} call {call.id} (run {call.run_id}): {said}")
    return violations
