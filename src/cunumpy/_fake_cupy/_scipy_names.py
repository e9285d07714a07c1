"""Names of CuPy 14.2's ``cupyx.scipy`` subpackages, as data.

Only these names are exposed by the fake ``cupyx.scipy.<sub>``, so code that uses a SciPy
name CuPy lacks (``special.jv``, ``linalg.inv``, ``interpolate.RectBivariateSpline`` …)
fails on the fake exactly as it would on a GPU. A listed name the installed SciPy lacks is
left out as well, and so are CuPy-only names without a SciPy counterpart (e.g.
``spatial.delaunay_2d``, ``fft.get_fft_plan``) and nested modules (``signal.windows``).

Checked against CuPy 14.2.0 (``tests/data/cupy_names.json``, see
``tests/unit/test_fake_cupy_names.py``). ``MIN_CUPY_VERSION`` is 14.0.0: a name CuPy added
after 14.0 would pass the checks but be missing on a minimum installation.
"""

from __future__ import annotations


def _split(text: str) -> frozenset:
    return frozenset(text.split())


CUPYX_SCIPY = {
    "special": _split(
        """
        j0 j1 y0 y1 yn i0 i0e i1 i1e k0 k0e k1 k1e spherical_yn gamma gammaln loggamma rgamma
        digamma psi polygamma multigammaln gammasgn gammainc gammaincc gammaincinv gammainccinv
        beta betaln betainc betaincinv poch zeta zetac lambertw erf erfc erfcx erfinv erfcinv
        log_ndtr ndtr ndtri expit logit log_expit log_softmax softmax logsumexp entr rel_entr
        kl_div huber pseudo_huber xlogy xlog1py exp1 expi expn exp2 exp10 expm1 log1p cbrt
        radian cosdg sindg tandg cotdg cosm1 round boxcox boxcox1p inv_boxcox inv_boxcox1p lpmv
        sph_harm ellipk ellipkm1 ellipj bdtr bdtrc bdtri btdtr btdtri chdtr chdtrc chdtri fdtr
        fdtrc fdtri gdtr gdtrc nbdtr nbdtrc nbdtri pdtr pdtrc pdtri binom sici shichi ellipeinc
        ellipkinc exprel sinc sph_harm_y wright_bessel
        """
    ),
    "linalg": _split(
        """
        lu lu_factor lu_solve solve_triangular block_diag circulant companion convolution_matrix
        dft fiedler fiedler_companion hadamard hankel helmert hilbert kron leslie toeplitz expm
        khatri_rao bandwidth
        """
    ),
    "interpolate": _split(
        """
        BarycentricInterpolator KroghInterpolator barycentric_interpolate krogh_interpolate
        PchipInterpolator pchip_interpolate Akima1DInterpolator CubicHermiteSpline CubicSpline
        PPoly BPoly NdPPoly BSpline make_interp_spline make_lsq_spline splantider splder
        UnivariateSpline RegularGridInterpolator interpn RBFInterpolator interp1d
        CloughTocher2DInterpolator InterpolatedUnivariateSpline LSQUnivariateSpline
        LinearNDInterpolator NdBSpline NearestNDInterpolator pchip
        """
    ),
    "signal": _split(
        """
        convolve correlate fftconvolve oaconvolve choose_conv_method convolve2d correlate2d
        wiener order_filter medfilt medfilt2d lfilter lfiltic lfilter_zi filtfilt sosfilt
        sosfiltfilt sosfilt_zi savgol_filter savgol_coeffs detrend hilbert hilbert2 resample
        resample_poly decimate upfirdn firwin firwin2 firls minimum_phase butter cheby1 cheby2
        ellip iirfilter iirdesign iirnotch iirpeak iircomb buttord cheb1ord cheb2ord ellipord
        freqz freqz_zpk sosfreqz freqs freqs_zpk group_delay zpk2tf tf2zpk zpk2sos sos2zpk
        sos2tf tf2sos bilinear bilinear_zpk lp2lp lp2hp lp2bp lp2bs get_window find_peaks
        peak_prominences peak_widths argrelmax argrelmin argrelextrema periodogram welch csd
        coherence spectrogram stft istft lombscargle vectorstrength czt zoom_fft CZT ZoomFFT
        gauss_spline cspline1d qspline1d cspline2d qspline2d cspline1d_eval qspline1d_eval
        spline_filter deconvolve unique_roots residue residuez invres invresz normalize
        abcd_normalize tf2ss ss2tf zpk2ss ss2zpk lti dlti chirp gausspulse sawtooth square
        unit_impulse max_len_seq BadCoefficients StateSpace TransferFunction ZerosPolesGain
        band_stop_obj bode buttap cheb1ap cheb2ap check_COLA check_NOLA cont2discrete
        correlation_lags czt_points dbode dfreqresp dimpulse dlsim dstep ellipap findfreqs
        freqresp freqz_sos gammatone impulse kaiser_atten kaiser_beta kaiserord lp2bp_zpk
        lp2bs_zpk lp2hp_zpk lp2lp_zpk lsim place_poles sepfir2d step sweep_poly symiirorder1
        symiirorder2
        """
    ),
    "ndimage": _split(
        """
        convolve correlate convolve1d correlate1d gaussian_filter gaussian_filter1d
        uniform_filter uniform_filter1d minimum_filter maximum_filter minimum_filter1d
        maximum_filter1d median_filter rank_filter percentile_filter generic_filter
        generic_filter1d prewitt sobel laplace gaussian_laplace gaussian_gradient_magnitude
        generic_laplace generic_gradient_magnitude affine_transform map_coordinates rotate shift
        zoom spline_filter spline_filter1d fourier_gaussian fourier_shift fourier_uniform
        fourier_ellipsoid label sum sum_labels mean variance standard_deviation minimum maximum
        median minimum_position maximum_position extrema center_of_mass histogram
        labeled_comprehension value_indices binary_erosion binary_dilation binary_opening
        binary_closing binary_hit_or_miss binary_propagation binary_fill_holes grey_erosion
        grey_dilation grey_opening grey_closing morphological_gradient morphological_laplace
        white_tophat black_tophat generate_binary_structure iterate_structure
        distance_transform_edt find_objects
        """
    ),
    "fft": _split(
        """
        fft ifft fft2 ifft2 fftn ifftn rfft irfft rfft2 irfft2 rfftn irfftn hfft ihfft hfft2
        ihfft2 hfftn ihfftn dct idct dctn idctn dst idst dstn idstn fftfreq rfftfreq fftshift
        ifftshift next_fast_len fht ifht
        """
    ),
    "stats": _split(
        """
        entropy trim_mean zscore zmap boxcox_llf
        """
    ),
    "spatial": _split(
        """
        KDTree Delaunay distance_matrix
        """
    ),
    "spatial.distance": _split(
        """
        cdist pdist minkowski euclidean sqeuclidean cityblock chebyshev canberra cosine
        correlation hamming jensenshannon russellrao
        """
    ),
    "sparse": _split(
        """
        spmatrix csr_matrix csc_matrix coo_matrix dia_matrix issparse isspmatrix isspmatrix_csr
        isspmatrix_csc isspmatrix_coo isspmatrix_dia eye identity diags spdiags random rand
        hstack vstack bmat kron kronsum tril triu find SparseEfficiencyWarning SparseWarning
        block_array block_diag coo_array csc_array csr_array dia_array diags_array eye_array
        get_index_dtype permute_dims random_array safely_cast_index_arrays sparray swapaxes
        """
    ),
    # Not in tests/data/cupy_names.json (its generator does not import these two), from
    # CuPy 14's documentation: fftpack's transforms (get_fft_plan is CuPy-only) and csgraph's
    # connected_components (on a GPU it needs pylibcugraph).
    "fftpack": _split(
        """
        fft ifft fft2 ifft2 fftn ifftn rfft irfft
        """
    ),
    "sparse.csgraph": _split(
        """
        connected_components
        """
    ),
    "sparse.linalg": _split(
        """
        cg gmres cgs minres lsqr lsmr spsolve spsolve_triangular factorized splu spilu norm
        eigsh svds LinearOperator aslinearoperator SuperLU bicgstab lobpcg matrix_power
        """
    ),
}

#: Functions whose first argument CuPy 14.2 converts with ``cupy.asarray`` (read from its
#: Python sources), so host data and lists are accepted there; other arguments and other
#: functions refuse host arrays.
HOST_FIRST_ARGUMENT = {
    "linalg": _split("bandwidth solve_triangular"),
    "ndimage": _split("labeled_comprehension"),
    "signal": _split(
        """
        argrelextrema argrelmax argrelmin check_COLA check_NOLA chirp csd czt decimate detrend
        gauss_spline gausspulse istft lombscargle periodogram resample resample_poly
        savgol_filter sawtooth sos2tf square unique_roots vectorstrength zoom_fft
        """
    ),
    "spatial": _split("distance_matrix"),
    "spatial.distance": _split("cdist"),
    "special": _split("multigammaln"),
}

#: Subpackages in import order (a parent before its children).
SUBPACKAGES = tuple(sorted(CUPYX_SCIPY, key=lambda s: s.count(".")))
