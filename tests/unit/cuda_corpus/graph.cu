// Graph and elimination kernels in the style of common GPU benchmark suites: a BFS level
// over a CSR graph of Node structs, an SSSP relaxation, and the two kernels of a Gaussian
// elimination step (Fan1 computes multipliers, Fan2 updates the rows below the pivot).
struct Node {
    int starting;
    int no_of_edges;
};

extern "C" __global__ void bfs_level(const Node *g_graph_nodes, const int *g_graph_edges, char *g_graph_mask,
                                     int *g_updating_graph_mask, const char *g_graph_visited, int *g_cost, int no_of_nodes)
{
    int tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid < no_of_nodes && g_graph_mask[tid]) {
        g_graph_mask[tid] = false;
        for (int i = g_graph_nodes[tid].starting; i < (g_graph_nodes[tid].no_of_edges + g_graph_nodes[tid].starting); i++) {
            int id = g_graph_edges[i];
            if (!g_graph_visited[id]) {
                atomicMin(&g_cost[id], g_cost[tid] + 1);
                atomicOr(&g_updating_graph_mask[id], 1);
            }
        }
    }
}

extern "C" __global__ void bfs_update(char *g_graph_mask, int *g_updating_graph_mask, char *g_graph_visited, int *g_over,
                                      int no_of_nodes)
{
    int tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid < no_of_nodes && g_updating_graph_mask[tid]) {
        g_graph_mask[tid] = true;
        g_graph_visited[tid] = true;
        atomicExch(g_over, 1);
        g_updating_graph_mask[tid] = 0;
    }
}

typedef struct {
    int to;
    float weight;
} Edge;

// Bellman-Ford relaxation of every edge of a node into the next distances (non-negative
// floats compare as their bits).
extern "C" __global__ void sssp_relax(const Node *nodes, const Edge *edges, const float *dist, float *dist_next,
                                      int *changed, int n)
{
    int u = blockIdx.x * blockDim.x + threadIdx.x;
    if (u >= n) return;
    float du = dist[u];
    if (du == INFINITY) return;
    for (int e = nodes[u].starting; e < nodes[u].starting + nodes[u].no_of_edges; e++) {
        float nd = du + edges[e].weight;
        int old = atomicMin((int *)&dist_next[edges[e].to], __float_as_int(nd));
        if (nd < __int_as_float(old)) atomicExch(changed, 1);
    }
}

// Multipliers of the rows below pivot t.
extern "C" __global__ void Fan1(float *m_cuda, const float *a_cuda, int Size, int t)
{
    int row = blockDim.x * blockIdx.x + threadIdx.x;
    if (row >= Size - 1 - t) return;
    m_cuda[Size * (row + t + 1) + t] = a_cuda[Size * (row + t + 1) + t] / a_cuda[Size * t + t];
}

// Row updates below pivot t (2-D grid), and the right-hand side.
extern "C" __global__ void Fan2(const float *m_cuda, float *a_cuda, float *b_cuda, int Size, int j1, int t)
{
    int xidx = blockIdx.x * blockDim.x + threadIdx.x;
    int yidx = blockIdx.y * blockDim.y + threadIdx.y;
    if (xidx >= Size - 1 - t) return;
    if (yidx >= Size - t) return;
    a_cuda[Size * (xidx + 1 + t) + (yidx + t)] -= m_cuda[Size * (xidx + 1 + t) + t] * a_cuda[Size * t + (yidx + t)];
    if (yidx == 0) b_cuda[xidx + 1 + t] -= m_cuda[Size * (xidx + 1 + t) + (yidx + t)] * b_cuda[t];
}
