"""Starting the ranks without torchrun: ``ddpcheck run --launch spawn`` and ``--launch srun``.

Runs in the launcher of every node (no module here imports torch). A user's job that starts
its ranks itself (``torch.multiprocessing.spawn``, or one task per rank under ``srun``) has no
torchrun agent to find the master, hand out ranks and hold the world together, so ddpcheck
does what that job does and checks what it relies on:

- ``launchspec`` parses the launch settings (``--launch``, ``--init-method``, the master,
  ``--rank-offsets``; ``config`` calls it) and says which ranks this node starts
  (``LaunchSpec``).
- Before any rank starts: ``mastercheck`` (can the ranks reach rank 0's store at the master
  address?) and ``initfile`` (is a file:// init file's directory shared, lockable, the file
  new?); ``ddpcheck.judgements.ranklayout`` judges whether the nodes' ranks make one world.
- ``plan`` ties these to the run (``SpawnPlan``): the pre-checks go on the node's check-in
  card, the file:// share token crosses the check-in store, each rank gets its environment.
- ``ranks`` starts one ``python -m ddpcheck.worker`` per local rank with that environment
  (mp.spawn's, or srun's task variables) and watches them as mp.spawn does, under the
  launcher's deadlines (``ddpcheck.launcher.launch.watch``).
- ``formation``, after the ranks ended: ranks that could not form the world through the init
  method become one ``world-not-formed`` problem instead of bare exits.

The ranks' own side (reading the init method, ``SLURM_PROCID``) is in ``ddpcheck.worker``
(``initmethod``, ``settings``) and ``ddpcheck.scheduler`` (``srunworld``, ``gpubinding``).
"""
