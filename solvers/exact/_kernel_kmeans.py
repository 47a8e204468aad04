"""Two-step kernel k-means (Hsieh, Si & Dhillon, ICML 2014, §3; Ghitta et al. 2011).

Step 1: kernel k-means (Lloyd iterations in feature space, Dhillon, Guan & Kulis 2004) on
m sampled points, initialised by k-means++ (Arthur & Vassilvitskii 2007) with feature-space
distances.  Step 2: every point joins the nearest centre in feature space:

    d(x, c)^2 = k(x, x) - 2/|c| sum_{j in c} k(x, s_j) + 1/|c|^2 sum_{j,l in c} k(s_j, s_l)

where the s_j are the sampled points of cluster c.  Costs: O(m^2) kernel values for step 1
and O(n m) for step 2.  The centres are kept as (sample rows, sample labels, per-cluster
constants), which is also what DC-SVM early prediction needs to route a test point.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from ._kernels import KernelData, KernelSpec, kernel_block, with_single_thread_blas

__all__ = ["KernelClusters", "kernel_kmeans", "two_step_kernel_kmeans", "assign_clusters"]


@numba.njit(nogil=True, cache=True)
def _kmeanspp(K, k, u):
    """k-means++ seeding in feature space.  K: (m, m) kernel, u: (k,) uniforms in [0,1)."""
    m = K.shape[0]
    centers = np.empty(k, dtype=np.int64)
    d2 = np.empty(m)
    c0 = min(int(u[0] * m), m - 1)
    centers[0] = c0
    for j in range(m):
        d2[j] = max(K[j, j] + K[c0, c0] - 2.0 * K[j, c0], 0.0)
    for t in range(1, k):
        tot = 0.0
        for j in range(m):
            tot += d2[j]
        if tot <= 0.0:
            # all remaining points coincide with a centre: take any unused point
            pick = t % m
        else:
            target = u[t] * tot
            acc = 0.0
            pick = m - 1
            for j in range(m):
                acc += d2[j]
                if acc > target:
                    pick = j
                    break
        centers[t] = pick
        for j in range(m):
            v = max(K[j, j] + K[pick, pick] - 2.0 * K[j, pick], 0.0)
            if v < d2[j]:
                d2[j] = v
    return centers


@numba.njit(nogil=True, cache=True)
def _cluster_constants(K, labels, k):
    """sizes (k,) and S_c = sum_{j,l in c} K_jl / |c|^2 (k,)."""
    m = K.shape[0]
    sizes = np.zeros(k)
    S = np.zeros(k)
    for j in range(m):
        sizes[labels[j]] += 1.0
    for j in range(m):
        cj = labels[j]
        for l in range(m):
            if labels[l] == cj:
                S[cj] += K[j, l]
    for c in range(k):
        if sizes[c] > 0:
            S[c] /= sizes[c] * sizes[c]
    return sizes, S


@numba.njit(nogil=True, cache=True)
def assign_rows(Krows, diag, sample_labels, sizes, S, labels_out, dist_out):
    """Nearest centre for each row of ``Krows`` (rows x m kernel values against the samples).

    ``diag`` (rows,) = k(x, x).  Empty clusters (size 0) are never chosen.  Writes
    ``labels_out`` (int64) and ``dist_out`` (squared feature-space distance, float64).
    """
    r, m = Krows.shape
    k = sizes.shape[0]
    acc = np.empty(k)
    for a in range(r):
        for c in range(k):
            acc[c] = 0.0
        row = Krows[a]
        for j in range(m):
            acc[sample_labels[j]] += row[j]
        best = -1
        bd = np.inf
        for c in range(k):
            if sizes[c] > 0:
                d = diag[a] - 2.0 * acc[c] / sizes[c] + S[c]
                if d < bd:
                    bd = d
                    best = c
        labels_out[a] = best
        dist_out[a] = max(bd, 0.0)


@numba.njit(nogil=True, cache=True)
def assign_rows_grouped(Krows, diag, ptr, sizes, S, labels_out, dist_out):
    """:func:`assign_rows` for samples ordered by cluster: cluster ``c`` owns columns
    ``ptr[c]:ptr[c+1]`` of ``Krows``, so its sum is a contiguous (vectorised) pass instead
    of a scatter-add by label (half the cost of the assignment step on ijcnn1)."""
    r = Krows.shape[0]
    k = sizes.shape[0]
    for a in range(r):
        row = Krows[a]
        best = -1
        bd = np.inf
        for c in range(k):
            if sizes[c] > 0:
                acc = 0.0
                for j in range(ptr[c], ptr[c + 1]):
                    acc += row[j]
                d = diag[a] - 2.0 * acc / sizes[c] + S[c]
                if d < bd:
                    bd = d
                    best = c
        labels_out[a] = best
        dist_out[a] = max(bd, 0.0)


@numba.njit(nogil=True, cache=True)
def _lloyd(K, labels, k, max_iter):
    m = K.shape[0]
    diag = np.empty(m)
    for j in range(m):
        diag[j] = K[j, j]
    new = np.empty(m, dtype=np.int64)
    dist = np.empty(m)
    it = 0
    for it in range(max_iter):  # noqa: B007  (the count after the loop is returned)
        sizes, S = _cluster_constants(K, labels, k)
        assign_rows(K, diag, labels, sizes, S, new, dist)
        changed = 0
        for j in range(m):
            if new[j] != labels[j]:
                changed += 1
            labels[j] = new[j]
        if changed == 0:
            break
    return it + 1


def kernel_kmeans(K: np.ndarray, n_clusters: int, rng: np.random.Generator, max_iter: int = 50):
    """Kernel k-means on a precomputed kernel matrix.

    Parameters
    ----------
    K : ndarray of shape (m, m), float64
        Symmetric positive semi-definite kernel matrix of the points.
    n_clusters : int
        Requested number of clusters (reduced to m if larger).
    rng : numpy.random.Generator
    max_iter : int
        Maximal number of Lloyd iterations.

    Returns
    -------
    labels : ndarray of shape (m,), int64
        Cluster of every point, renumbered 0..k'-1 with no empty cluster (k' <= n_clusters).

    Raises
    ------
    ValueError
        If K is not square or n_clusters < 1.
    """
    K = np.ascontiguousarray(K, dtype=np.float64)
    if K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise ValueError(f"K must be square, got shape {K.shape}")
    if n_clusters < 1:
        raise ValueError("n_clusters must be >= 1")
    m = K.shape[0]
    k = min(int(n_clusters), m)
    centers = _kmeanspp(K, k, rng.random(k))
    diag = np.ascontiguousarray(np.diag(K))
    # initial assignment: nearest seed
    Kc = np.ascontiguousarray(K[:, centers])
    d = diag[:, None] - 2.0 * Kc + diag[centers][None, :]
    labels = np.argmin(d, axis=1).astype(np.int64)
    _lloyd(K, labels, k, max_iter)
    _, labels = np.unique(labels, return_inverse=True)
    return labels.astype(np.int64)


@dataclass
class KernelClusters:
    """Cluster centres in feature space, each the mean of its sampled points.

    Attributes
    ----------
    samples : KernelData
        The m sampled rows.
    sample_labels : ndarray of shape (m,), int64
    sizes : ndarray of shape (k,), float64
        Sampled points per cluster (all > 0).
    S : ndarray of shape (k,), float64
        ``1/|c|^2 sum_{j,l in c} k(s_j, s_l)``.
    """

    samples: KernelData
    sample_labels: np.ndarray
    sizes: np.ndarray
    S: np.ndarray

    @property
    def n_clusters(self) -> int:
        return int(self.sizes.shape[0])


@with_single_thread_blas
def assign_clusters(
    clusters: KernelClusters,
    kd: KernelData,
    spec: KernelSpec,
    rows=None,
    chunk_mb: float = 4.0,
    progress=None,
):
    """Nearest centre (feature space) for rows of ``kd``; ``progress(done, total)`` (rows)
    after every chunk.

    Returns
    -------
    labels : ndarray of shape (n_rows,), int64
    dist2 : ndarray of shape (n_rows,), float64
        Squared feature-space distance to that centre.
    """
    rows = np.arange(kd.n_samples) if rows is None else np.asarray(rows, dtype=np.int64)
    n = rows.shape[0]
    m = clusters.samples.n_samples
    labels = np.empty(n, dtype=np.int64)
    dist = np.empty(n)
    diag = kd.diag(spec)[rows]
    step = max(1, int(chunk_mb * 2**20 / (8 * max(m, 1))))
    # samples grouped by cluster: contiguous per-cluster sums
    order = np.argsort(clusters.sample_labels, kind="stable")
    samples = clusters.samples.take(order)
    ptr = np.searchsorted(clusters.sample_labels[order], np.arange(clusters.n_clusters + 1)).astype(np.int64)
    for s in range(0, n, step):
        Kr = kernel_block(kd, samples, spec, rows=rows[s : s + step])
        assign_rows_grouped(
            Kr,
            diag[s : s + step],
            ptr,
            clusters.sizes,
            clusters.S,
            labels[s : s + step],
            dist[s : s + step],
        )
        if progress is not None:
            progress(min(s + step, n), n)
    return labels, dist


@with_single_thread_blas
def two_step_kernel_kmeans(
    kd: KernelData,
    spec: KernelSpec,
    n_clusters: int,
    sample_idx,
    rng: np.random.Generator,
    max_iter: int = 50,
    progress=None,
):
    """Two-step kernel k-means of all rows of ``kd`` (Hsieh et al. 2014, §3).

    ``progress(step, done, total)``, optional: ``step`` "sample kernel" / "sample k-means"
    (done = total = m sampled rows, once each) then "assign" (rows of ``kd`` assigned so far,
    after every chunk) — the stage that took 8 s on ijcnn1 with nothing shown.

    Parameters
    ----------
    kd : KernelData
        All n points.
    spec : KernelSpec
    n_clusters : int
        Requested k (at most the number of samples).
    sample_idx : int array of shape (m,)
        Rows of ``kd`` on which kernel k-means is run (e.g. a random sample, or a sample
        of the current support vectors for DC-SVM's adaptive clustering).
    rng : numpy.random.Generator

    Returns
    -------
    labels : ndarray of shape (n,), int64
        Cluster of every point, 0..k'-1; clusters that receive no point are removed.
    clusters : KernelClusters
        The centres (renumbered consistently with ``labels``).
    """
    sample_idx = np.asarray(sample_idx, dtype=np.int64)
    samples = kd.take(sample_idx)
    note = progress if progress is not None else (lambda *_: None)
    m = samples.n_samples
    K = kernel_block(samples, samples, spec)
    note("sample kernel", m, m)
    slab = kernel_kmeans(K, n_clusters, rng, max_iter=max_iter)
    note("sample k-means", m, m)
    k = int(slab.max()) + 1
    sizes, S = _cluster_constants(K, slab, k)
    clusters = KernelClusters(samples, slab, sizes, S)
    labels, _ = assign_clusters(clusters, kd, spec, progress=lambda done, total: note("assign", done, total))
    # drop clusters that received no point and renumber
    used = np.unique(labels)
    if used.shape[0] < k:
        remap = np.full(k, -1, dtype=np.int64)
        remap[used] = np.arange(used.shape[0])
        keep = remap[slab] >= 0
        samples = samples.take(np.flatnonzero(keep))
        slab = remap[slab[keep]]
        clusters = KernelClusters(samples, slab, sizes[used].copy(), S[used].copy())
        labels = remap[labels]
    return labels, clusters
