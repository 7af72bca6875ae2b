"""Between the nodes: the launchers' multi-node steps through the rendezvous endpoint's store.

Runs in the launcher on every node of a multi-node run, before torchrun starts and after it
ends; three pure modules serve the ranks too (``pairing``, ``deadlines``, and ``store``'s
gather). ``lifecycle`` is the story before torchrun: connect to the endpoint, check in
(``checkin`` writes this node's card, ``board`` lets the node hosting the store judge all
cards and publish one decision in O(N) store operations), then the peer probes in the steps
of ``nodeflow``: ``peerprobe`` connects to the peers ``pairing`` picks (O(N log N) at scale)
and ``bulkprobe`` sends them payloads, ``pathjudge`` names the paths that drop large frames,
``namecheck`` resolves the names the ranks will dial, and ``userjob`` checks what the user's
own torchrun would hit (who hosts the store, the names agents advertise). After torchrun,
``ending`` gathers every node's outcome so every node prints the same verdict.

``store`` opens torch's TCPStore (the only torch import on the launcher side, lazy) and
holds the "gather with a deadline" and "hold the store until the others have read it"
helpers; ``deadlines`` makes every wait grow with the world; ``pairing`` also plans the
worker's link rounds (checks/test_links.py). What the launchers tell each other (card,
check-in decision, run outcome) crosses as ``messages``: typed, versioned, read leniently,
like the ranks' events.
"""
