"""A process's hints leave in the order handed over, but a push waits only for the earlier pushes of its own lanes
(its conversations): one slow conversation does not hold back the others' live text."""

import asyncio
import threading

from devtools.stack import wait_until
from runtime.outbound import HintSender


def test_a_push_waits_for_the_earlier_pushes_of_its_own_lane_only():
    sender = HintSender()
    first_may_finish = threading.Event()
    sent: list[str] = []

    async def push(name: str, *, held: bool = False) -> None:
        if held:
            await asyncio.to_thread(first_may_finish.wait, 30)
        sent.append(name)

    sender.send(push("a1", held=True), lanes=("conversation.a",))
    sender.send(push("b1"), lanes=("conversation.b",))
    sender.send(push("a2"), lanes=("conversation.a",))
    sender.send(push("b2"), lanes=("conversation.b",))

    wait_until(lambda: len(sent) == 2, timeout=30, what="the other lane's pushes")
    assert sent == ["b1", "b2"]  # a2 waits behind a1, which is held
    first_may_finish.set()
    wait_until(lambda: len(sent) == 4, timeout=30, what="the held lane's pushes")
    assert sent == ["b1", "b2", "a1", "a2"]


def test_a_push_to_several_lanes_goes_after_each_lane_s_earlier_pushes_and_before_their_later_ones():
    sender = HintSender()
    may_finish = {"a1": threading.Event(), "b1": threading.Event()}
    sent: list[str] = []

    async def push(name: str) -> None:
        if name in may_finish:
            await asyncio.to_thread(may_finish[name].wait, 30)
        sent.append(name)

    sender.send(push("a1"), lanes=("conversation.a",))
    sender.send(push("b1"), lanes=("conversation.b",))
    sender.send(push("ab"), lanes=("conversation.a", "conversation.b"))
    sender.send(push("a2"), lanes=("conversation.a",))
    sender.send(push("c1"), lanes=("conversation.c",))

    wait_until(lambda: sent == ["c1"], timeout=30, what="the unrelated lane's push")
    may_finish["a1"].set()
    wait_until(lambda: sent == ["c1", "a1"], timeout=30, what="the first lane's held push")
    may_finish["b1"].set()  # "ab" waited for both lanes; "a2" waits for "ab"
    wait_until(lambda: len(sent) == 5, timeout=30, what="the rest")
    assert sent == ["c1", "a1", "b1", "ab", "a2"]


def test_a_wake_up_leaves_before_the_hints_handed_over_after_it():
    sender = HintSender()
    sent: list[str] = []
    wake_up_may_finish = threading.Event()

    def wake_up() -> None:  # a blocking hint, as a Celery send is
        wake_up_may_finish.wait(30)
        sent.append("wake-up")

    async def push(name: str) -> None:
        sent.append(name)

    sender.send(push("before"), lanes=("conversation.a",))
    sender.send(wake_up)
    sender.send(push("after"), lanes=("conversation.b",))

    wait_until(lambda: sent == ["before"], timeout=30, what="the push handed over first")
    wake_up_may_finish.set()
    wait_until(lambda: len(sent) == 3, timeout=30, what="the rest")
    assert sent == ["before", "wake-up", "after"]
