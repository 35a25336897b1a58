"""A process's hints leave in the order handed over, but a push waits only for the earlier pushes of its own lane
(its conversation): one slow conversation does not hold back the others' live text."""

import asyncio
import threading

from impo.devstack import wait_until
from runtime.outbound import HintSender


def test_a_push_waits_for_the_earlier_pushes_of_its_own_lane_only():
    sender = HintSender()
    first_may_finish = threading.Event()
    sent: list[str] = []

    async def push(name: str, *, held: bool = False) -> None:
        while held and not first_may_finish.is_set():
            await asyncio.sleep(0.01)
        sent.append(name)

    sender.send(push("a1", held=True), lane="conversation.a")
    sender.send(push("b1"), lane="conversation.b")
    sender.send(push("a2"), lane="conversation.a")
    sender.send(push("b2"), lane="conversation.b")

    wait_until(lambda: len(sent) == 2, timeout=30, what="the other lane's pushes")
    assert sent == ["b1", "b2"]  # a2 waits behind a1, which is held
    first_may_finish.set()
    wait_until(lambda: len(sent) == 4, timeout=30, what="the held lane's pushes")
    assert sent == ["b1", "b2", "a1", "a2"]


def test_a_wake_up_leaves_before_the_hints_handed_over_after_it():
    sender = HintSender()
    sent: list[str] = []
    wake_up_may_finish = threading.Event()

    def wake_up() -> None:  # a blocking hint, as a Celery send is
        wake_up_may_finish.wait(30)
        sent.append("wake-up")

    async def push(name: str) -> None:
        sent.append(name)

    sender.send(push("before"), lane="conversation.a")
    sender.send(wake_up)
    sender.send(push("after"), lane="conversation.b")

    wait_until(lambda: sent == ["before"], timeout=30, what="the push handed over first")
    wake_up_may_finish.set()
    wait_until(lambda: len(sent) == 3, timeout=30, what="the rest")
    assert sent == ["before", "wake-up", "after"]
