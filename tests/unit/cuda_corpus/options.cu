// Option pricing in the style of the CUDA samples' "BlackScholes" and "binomialOptions".
#define A1 0.31938153f
#define A2 -0.356563782f
#define A3 1.781477937f
#define A4 -1.821255978f
#define A5 1.330274429f
#define RSQRT2PI 0.39894228040143267793994605993438f

__device__ inline float cndGPU(float d)
{
    float K = __fdividef(1.0f, (1.0f + 0.2316419f * fabsf(d)));
    float cnd = RSQRT2PI * __expf(-0.5f * d * d) * (K * (A1 + K * (A2 + K * (A3 + K * (A4 + K * A5)))));
    if (d > 0) cnd = 1.0f - cnd;
    return cnd;
}

__device__ inline void BlackScholesBodyGPU(float &CallResult, float &PutResult, float S, float X, float T, float R, float V)
{
    float sqrtT = sqrtf(T);
    float d1 = __fdividef(__logf(S / X) + (R + 0.5f * V * V) * T, V * sqrtT);
    float d2 = d1 - V * sqrtT;
    float CNDD1 = cndGPU(d1);
    float CNDD2 = cndGPU(d2);
    float expRT = __expf(-R * T);
    CallResult = S * CNDD1 - X * expRT * CNDD2;
    PutResult = X * expRT * (1.0f - CNDD2) - S * (1.0f - CNDD1);
}

// Two options per thread through float2 loads and stores, as the sample does.
extern "C" __global__ void BlackScholesGPU(float2 *__restrict d_CallResult, float2 *__restrict d_PutResult,
                                           const float2 *__restrict d_StockPrice, const float2 *__restrict d_OptionStrike,
                                           const float2 *__restrict d_OptionYears, float Riskfree, float Volatility,
                                           int optN)
{
    const int opt = blockDim.x * blockIdx.x + threadIdx.x;
    if (opt < (optN / 2)) {
        float callResult1, callResult2, putResult1, putResult2;
        BlackScholesBodyGPU(callResult1, putResult1, d_StockPrice[opt].x, d_OptionStrike[opt].x, d_OptionYears[opt].x,
                            Riskfree, Volatility);
        BlackScholesBodyGPU(callResult2, putResult2, d_StockPrice[opt].y, d_OptionStrike[opt].y, d_OptionYears[opt].y,
                            Riskfree, Volatility);
        d_CallResult[opt] = make_float2(callResult1, callResult2);
        d_PutResult[opt] = make_float2(putResult1, putResult2);
    }
}

// European call by a binomial tree, one option per block (the tree in shared memory).
#define NUM_STEPS 64
extern "C" __global__ void binomialOptionsKernel(const double *S, const double *X, const double *vDt, const double *puByDf,
                                                 const double *pdByDf, double *callValue)
{
    __shared__ double callA[NUM_STEPS + 1];
    const int i = blockIdx.x;
    const int tid = threadIdx.x;
    const double u = exp(vDt[i]);
    for (int k = tid; k <= NUM_STEPS; k += blockDim.x) {
        double price = S[i] * pow(u, 2.0 * k - NUM_STEPS);
        callA[k] = fmax(price - X[i], 0.0);
    }
    for (int step = NUM_STEPS; step > 0; step--) {
        __syncthreads();
        double v[2];
        int m = 0;
        for (int k = tid; k < step; k += blockDim.x) v[m++] = puByDf[i] * callA[k + 1] + pdByDf[i] * callA[k];
        __syncthreads();
        m = 0;
        for (int k = tid; k < step; k += blockDim.x) callA[k] = v[m++];
    }
    __syncthreads();
    if (tid == 0) callValue[i] = callA[0];
}
