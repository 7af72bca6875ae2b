"""The multi-node steps, between the nodes' launchers, through the rendezvous endpoint's store.

Runs in the launcher on every node, before torchrun starts and after it ends. ``lifecycle``
is the story: connect to the endpoint, check in (``checkin`` writes this node's card,
``board`` lets the endpoint node judge all cards and publish one verdict in O(N) store
operations), probe the peers (``peerprobe``, with the pairs chosen by ``linkplan`` so the
cost stays O(N log N) at scale; ``nodeflow`` is one node's steps in order; ``userjob``
checks what the user's own torchrun would hit there: who hosts the store, which names the
agents advertise), and at the end
(``ending``) post this node's outcome so every node prints the same verdict. ``store`` opens
torch's TCPStore (the only torch import on the launcher side, lazy) and holds the "gather
with a deadline" and "hold the store until the others have read it" helpers. What the
launchers tell each other (card, check-in decision, run outcome) crosses as ``messages``:
typed, versioned, read leniently, like the ranks' events.
"""
