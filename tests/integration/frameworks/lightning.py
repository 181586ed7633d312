"""PyTorch Lightning ModelCheckpoint(save_top_k=2, save_last='link') as in
Lightning #20270: torch.save into a temp file in $TMPDIR, then
shutil.move to the mount -> rename fails with EXDEV -> copy2 (copy +
copystat: utime, chmod, xattrs), unlink the temp; chmod 0666 & ~umask;
`last.ckpt`: remove the old link, symlink to the new file; rotation removes
the oldest file.  Load: list the directory, newest `last*.ckpt` by mtime."""
import errno
import glob
import os
import shutil
import tempfile

from _common import check, main, payload, read_torch_like

KEEP = 2


def data_for(step, seed):
    return payload(seed, f"{step}/ckpt", 1_200_000 + step)


def name_for(step):
    return f"epoch=0-step={step}.ckpt"


def save(root, steps, seed, _a):
    os.makedirs(root, exist_ok=True)
    umask = os.umask(0)
    os.umask(umask)
    for step in steps:
        fd, tmp = tempfile.mkstemp(suffix=".ckpt")     # $TMPDIR: local disk
        with os.fdopen(fd, "wb") as f:                  # torch.save
            data = data_for(step, seed)
            for i in range(0, len(data), 65536):
                f.write(data[i:i + 65536])
        dst = os.path.join(root, name_for(step))
        # shutil.move: os.rename first; across filesystems (the mount) it
        # fails with EXDEV and move falls back to copy2 + unlink
        try:
            os.rename(tmp, dst)
            moved_by_copy = False
        except OSError as e:
            if e.errno != errno.EXDEV:
                raise
            shutil.copy2(tmp, dst)     # copyfile + copystat (utime, chmod, xattrs)
            os.unlink(tmp)
            moved_by_copy = True
        os.chmod(dst, 0o666 & ~umask)
        last = os.path.join(root, "last.ckpt")
        if os.path.lexists(last):
            os.remove(last)
        os.symlink(name_for(step), last)
        ckpts = sorted(glob.glob(os.path.join(root, "epoch=*-step=*.ckpt")),
                       key=lambda p: int(p.rsplit("=", 1)[1][:-5]))
        for old in ckpts[:-KEEP]:
            os.remove(old)
    return {"saved": steps, "exdev": moved_by_copy}


def load(root, a):
    lasts = [os.path.join(root, n) for n in os.listdir(root)
             if n.startswith("last") and n.endswith(".ckpt")]
    lasts = [p for p in lasts if os.path.exists(p)]
    if not lasts:
        return {"latest": None}
    newest = max(lasts, key=os.path.getmtime)
    target = os.readlink(newest) if os.path.islink(newest) else os.path.basename(newest)
    step = int(target.rsplit("=", 1)[1][:-5])
    got = read_torch_like(newest)
    return {"latest": target, "read": {target: check(newest, got, data_for(step, a.seed))}}


if __name__ == "__main__":
    main(save, load)
