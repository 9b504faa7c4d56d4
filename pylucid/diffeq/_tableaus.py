"""Butcher tableaus: the solvers of ``pylucid.diffeq`` as data.

An explicit tableau has nodes ``c``, a strictly lower-triangular ``a`` (row
``i`` holds ``a[i][:i]``), weights ``b``, the error weights ``e = b - b_hat``
of an embedded lower-order solution (adaptive methods), the weights ``mid``
of the solution at the step's midpoint (the dense output: with ``y0, y1,
f0, f1`` they fix the quartic interpolant torchdiffeq uses) and the order
the step-size controller assumes. A tableau is FSAL when its last stage is
``f(t1, y1)``: that stage's state is ``y1`` and its value is the next step's
first stage.

An implicit tableau has a full (or lower-triangular with a diagonal) ``a``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Explicit:
    name: str
    order: int
    c: tuple
    a: tuple  # a[i] = (a_i0, ..., a_i,i-1)
    b: tuple
    e: tuple | None = None  # b - b_hat
    mid: tuple | None = None  # weights of y(t0 + dt/2) = y0 + dt * sum mid_i k_i

    @property
    def fsal(self) -> bool:
        return self.c[-1] == 1.0 and tuple(self.a[-1]) + (0.0,) == tuple(self.b)


@dataclass(frozen=True)
class Implicit:
    name: str
    order: int
    c: tuple
    a: tuple  # full s x s
    b: tuple

    @property
    def diagonal(self) -> bool:
        """Diagonally implicit (DIRK / SDIRK / ESDIRK): the stages solve one after the other."""
        return all(self.a[i][j] == 0.0 for i in range(len(self.c)) for j in range(i + 1, len(self.c)))


def _lower(rows):
    return tuple(tuple(r) for r in rows)


# ---------------------------------------------------------------- fixed-step explicit methods
EULER = Explicit("euler", 1, (0.0,), ((),), (1.0,))
MIDPOINT = Explicit("midpoint", 2, (0.0, 0.5), ((), (0.5,)), (0.0, 1.0))
HEUN2 = Explicit("heun2", 2, (0.0, 1.0), ((), (1.0,)), (0.5, 0.5))
HEUN3 = Explicit("heun3", 3, (0.0, 1 / 3, 2 / 3), ((), (1 / 3,), (0.0, 2 / 3)), (0.25, 0.0, 0.75))
# the 3/8 rule, torchdiffeq's "rk4" (a smaller error constant than the classic rule)
RK4 = Explicit("rk4", 4, (0.0, 1 / 3, 2 / 3, 1.0), ((), (1 / 3,), (-1 / 3, 1.0), (1.0, -1.0, 1.0)),
               (1 / 8, 3 / 8, 3 / 8, 1 / 8))

# ---------------------------------------------------------------- adaptive explicit methods
# Heun's method with Euler as the embedded solution. As in torchdiffeq, a tableau that is not FSAL still hands its
# last stage to the next step as f0 (here f at the Euler predictor): an O(dt^2) difference that keeps the order
ADAPTIVE_HEUN = Explicit("adaptive_heun", 2, (0.0, 1.0), ((), (1.0,)), (0.5, 0.5), e=(0.5, -0.5), mid=(0.5, 0.0))
# Fehlberg's RK1(2), propagating the second-order solution (local extrapolation) as torchdiffeq does
FEHLBERG2 = Explicit("fehlberg2", 2, (0.0, 0.5, 1.0), ((), (0.5,), (1 / 256, 255 / 256)), (1 / 512, 255 / 256, 1 / 512),
                     e=(-1 / 512, 0.0, 1 / 512), mid=(0.0, 0.5, 0.0))
BOSH3 = Explicit("bosh3", 3, (0.0, 0.5, 0.75, 1.0), ((), (0.5,), (0.0, 0.75), (2 / 9, 1 / 3, 4 / 9)),
                 (2 / 9, 1 / 3, 4 / 9, 0.0), e=(2 / 9 - 7 / 24, 1 / 3 - 1 / 4, 4 / 9 - 1 / 3, -1 / 8),
                 mid=(0.0, 0.5, 0.0, 0.0))
DOPRI5 = Explicit(
    "dopri5", 5, (0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0),
    _lower([(), (1 / 5,), (3 / 40, 9 / 40), (44 / 45, -56 / 15, 32 / 9),
            (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
            (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656),
            (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84)]),
    (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0.0),
    e=(35 / 384 - 1951 / 21600, 0.0, 500 / 1113 - 22642 / 50085, 125 / 192 - 451 / 720,
       -2187 / 6784 + 12231 / 42400, 11 / 84 - 649 / 6300, -1 / 60),
    # Shampine's continuous extension of Dormand-Prince at theta = 1/2
    mid=(6025192743 / 30085553152 / 2, 0.0, 51252292925 / 65400821598 / 2, -2691868925 / 45128329728 / 2,
         187940372067 / 1594534317056 / 2, -1776094331 / 19743644256 / 2, 11237099 / 235043384 / 2),
)

# Tsitouras' 5(4) pair (2011)
_T = dict(
    a21=0.161, a31=-0.008480655492356989, a32=0.335480655492357, a41=2.897153057105493, a42=-6.359448489975075,
    a43=4.3622954328695815, a51=5.325864828439257, a52=-11.748883564062828, a53=7.4955393428898365,
    a54=-0.09249506636175525, a61=5.86145544294642, a62=-12.92096931784711, a63=8.159367898576159,
    a64=-0.071584973281401, a65=-0.028269050394068383, a71=0.09646076681806523, a72=0.01, a73=0.4798896504144996,
    a74=1.379008574103742, a75=-3.290069515436081, a76=2.324710524099774,
)


def _tsit5_dense(theta: float) -> tuple:
    """Tsitouras' continuous-extension weights b_i(theta); b_i(1) are the weights of the step."""
    t = theta
    return (
        -1.0530884977290216 * t * (t - 1.3299890189751412) * (t * t - 1.4364028541716351 * t + 0.7139816917074209),
        0.1017 * t * t * (t * t - 2.1966568338249754 * t + 1.2949852507374631),
        2.490627285651252793 * t * t * (t * t - 2.38535645472061657 * t + 1.57803468208092486),
        -16.54810288924490272 * (t - 1.21712927295533244) * (t - 0.61620406037800089) * t * t,
        47.37952196281928122 * (t - 1.203071208372362603) * (t - 0.658047292653547382) * t * t,
        -34.87065786149660974 * (t - 1.2) * (t - 0.666666666666666667) * t * t,
        2.5 * (t - 1.0) * (t - 0.6) * t * t,
    )


TSIT5 = Explicit(
    "tsit5", 5, (0.0, 0.161, 0.327, 0.9, 0.9800255409045097, 1.0, 1.0),
    _lower([(), (_T["a21"],), (_T["a31"], _T["a32"]), (_T["a41"], _T["a42"], _T["a43"]),
            (_T["a51"], _T["a52"], _T["a53"], _T["a54"]), (_T["a61"], _T["a62"], _T["a63"], _T["a64"], _T["a65"]),
            (_T["a71"], _T["a72"], _T["a73"], _T["a74"], _T["a75"], _T["a76"])]),
    (_T["a71"], _T["a72"], _T["a73"], _T["a74"], _T["a75"], _T["a76"], 0.0),
    e=(-0.00178001105222577714, -0.0008164344596567469, 0.007880878010261995, -0.1447110071732629,
       0.5823571654525552, -0.45808210592918697, 1 / 66),
    mid=_tsit5_dense(0.5),
)

# Dormand-Prince 8(7) (Prince & Dormand 1981), 13 stages + FSAL, with its 7th-order continuous extension at 1/2
_D8_C = (0.0, 1 / 18, 1 / 12, 1 / 8, 5 / 16, 3 / 8, 59 / 400, 93 / 200, 5490023248 / 9719169821, 13 / 20,
         1201146811 / 1299019798, 1.0, 1.0, 1.0)
_D8_A = [
    (), (1 / 18,), (1 / 48, 1 / 16), (1 / 32, 0, 3 / 32), (5 / 16, 0, -75 / 64, 75 / 64),
    (3 / 80, 0, 0, 3 / 16, 3 / 20),
    (29443841 / 614563906, 0, 0, 77736538 / 692538347, -28693883 / 1125000000, 23124283 / 1800000000),
    (16016141 / 946692911, 0, 0, 61564180 / 158732637, 22789713 / 633445777, 545815736 / 2771057229,
     -180193667 / 1043307555),
    (39632708 / 573591083, 0, 0, -433636366 / 683701615, -421739975 / 2616292301, 100302831 / 723423059,
     790204164 / 839813087, 800635310 / 3783071287),
    (246121993 / 1340847787, 0, 0, -37695042795 / 15268766246, -309121744 / 1061227803, -12992083 / 490766935,
     6005943493 / 2108947869, 393006217 / 1396673457, 123872331 / 1001029789),
    (-1028468189 / 846180014, 0, 0, 8478235783 / 508512852, 1311729495 / 1432422823, -10304129995 / 1701304382,
     -48777925059 / 3047939560, 15336726248 / 1032824649, -45442868181 / 3398467696, 3065993473 / 597172653),
    (185892177 / 718116043, 0, 0, -3185094517 / 667107341, -477755414 / 1098053517, -703635378 / 230739211,
     5731566787 / 1027545527, 5232866602 / 850066563, -4093664535 / 808688257, 3962137247 / 1805957418,
     65686358 / 487910083),
    (403863854 / 491063109, 0, 0, -5068492393 / 434740067, -411421997 / 543043805, 652783627 / 914296604,
     11173962825 / 925320556, -13158990841 / 6184727034, 3936647629 / 1978049680, -160528059 / 685178525,
     248638103 / 1413531060, 0),
]
_D8_B = (14005451 / 335480064, 0, 0, 0, 0, -59238493 / 1068277825, 181606767 / 758867731, 561292985 / 797845732,
         -1041891430 / 1371343529, 760417239 / 1151165299, 118820643 / 751138087, -528747749 / 2220607170, 1 / 4)
_D8_BHAT = (13451932 / 455176623, 0, 0, 0, 0, -808719846 / 976000145, 1757004468 / 5645159321,
            656045339 / 265891186, -3867574721 / 1518517206, 465885868 / 322736535, 53011238 / 667516719, 2 / 45, 0)


def _d8_mid() -> tuple:
    h = 0.5
    p = {  # the coefficients of h^5 .. h^1 (and h^0 for the first weight)
        0: (-6.3448349392860401388, 22.1396504998094068976, -30.0610568289666450593, 19.9990069333683970610,
            -6.6910181737837595697, 1.0),
        5: (-39.6107919852202505218, 116.4422149550342161651, -121.4999627731334642623, 52.2273532792945524050,
            -7.6142658045872677172, 0.0),
        6: (20.3761213808791436958, -67.1451318825957197185, 83.1721004639847717481, -46.8919164181093621583,
            10.7281392630428866124, 0.0),
        7: (7.3347098826795362023, -16.5672243527496524646, 9.5724507555993664382, -0.1890893225010595467,
            0.5526637063753648783, 0.0),
        8: (32.8801774352459155182, -89.9916014847245016028, 87.8406057677205645007, -35.7075975946222072821,
            4.2186562625665153803, 0.0),
        9: (-10.1588990526426760954, 22.6237489648532849093, -17.4152107770762969005, 6.2736448083240352160,
            -0.6627209125361597559, 0.0),
        10: (-12.5401268098782561200, 32.2362340167355370113, -28.5903289514790976966, 10.3160881272450748458,
             -1.2636789001135462218, 0.0),
        11: (29.5553001484516038033, -82.1020315488359848644, 81.6630950584341412934, -34.7650769866611817349,
             5.4106037898590422230, 0.0),
        12: (-41.7923486424390588923, 116.2662185791119533462, -114.9375291377009418170, 47.7457971078225540396,
             -7.0321379067945741781, 0.0),
        13: (20.3006925822100825485, -53.9020777466385396792, 50.2558364226176017553, -19.0082099341608028453,
             2.3537586759714983486, 0.0),
    }
    out = [0.0] * 14
    for i, (c5, c4, c3, c2, c1, c0) in p.items():
        out[i] = (c5 * h ** 5 + c4 * h ** 4 + c3 * h ** 3 + c2 * h ** 2 + c1 * h + c0) * h
    return tuple(out)


DOPRI8 = Explicit("dopri8", 8, _D8_C, _lower([tuple(float(v) for v in r) for r in _D8_A] + [_D8_B]),
                  tuple(float(v) for v in _D8_B) + (0.0,),
                  e=tuple(float(x - y) for x, y in zip(_D8_B, _D8_BHAT)) + (0.0,), mid=_d8_mid())

EXPLICIT_FIXED = {t.name: t for t in (EULER, MIDPOINT, HEUN2, HEUN3, RK4)}
EXPLICIT_ADAPTIVE = {t.name: t for t in (ADAPTIVE_HEUN, FEHLBERG2, BOSH3, DOPRI5, TSIT5, DOPRI8)}

# ---------------------------------------------------------------- implicit methods (fixed step, Newton)
_S6 = math.sqrt(6.0)
_S3 = math.sqrt(3.0)
_S15 = math.sqrt(15.0)
IMPLICIT_EULER = Implicit("implicit_euler", 1, (1.0,), ((1.0,),), (1.0,))
RADAU = Implicit(  # Radau IIA, 3 stages, order 5, L-stable and stiffly accurate
    "radau", 5, ((4 - _S6) / 10, (4 + _S6) / 10, 1.0),
    (((88 - 7 * _S6) / 360, (296 - 169 * _S6) / 1800, (-2 + 3 * _S6) / 225),
     ((296 + 169 * _S6) / 1800, (88 + 7 * _S6) / 360, (-2 - 3 * _S6) / 225),
     ((16 - _S6) / 36, (16 + _S6) / 36, 1 / 9)),
    ((16 - _S6) / 36, (16 + _S6) / 36, 1 / 9),
)
GAUSS_LEGENDRE4 = Implicit(  # 2 stages, order 4, A-stable and symplectic
    "gauss_legendre4", 4, (0.5 - _S3 / 6, 0.5 + _S3 / 6),
    ((0.25, 0.25 - _S3 / 6), (0.25 + _S3 / 6, 0.25)), (0.5, 0.5),
)
GAUSS_LEGENDRE6 = Implicit(  # 3 stages, order 6
    "gauss_legendre6", 6, (0.5 - _S15 / 10, 0.5, 0.5 + _S15 / 10),
    ((5 / 36, 2 / 9 - _S15 / 15, 5 / 36 - _S15 / 30),
     (5 / 36 + _S15 / 24, 2 / 9, 5 / 36 - _S15 / 24),
     (5 / 36 + _S15 / 30, 2 / 9 + _S15 / 15, 5 / 36)),
    (5 / 18, 4 / 9, 5 / 18),
)
_G2 = 1 - 1 / math.sqrt(2.0)
SDIRK2 = Implicit(  # Alexander's 2-stage L-stable SDIRK, order 2, stiffly accurate
    "sdirk2", 2, (_G2, 1.0), ((_G2, 0.0), (1 - _G2, _G2)), (1 - _G2, _G2),
)
# Alexander's 3-stage L-stable SDIRK, order 3: gamma is the root of x^3 - 3x^2 + 3x/2 - 1/6 in (1/6, 1/2)
_G3 = 0.43586652150845899942
_B1 = -(6 * _G3 ** 2 - 16 * _G3 + 1) / 4
_B2 = (6 * _G3 ** 2 - 20 * _G3 + 5) / 4
SDIRK3 = Implicit(
    "sdirk3", 3, (_G3, (1 + _G3) / 2, 1.0),
    ((_G3, 0.0, 0.0), ((1 - _G3) / 2, _G3, 0.0), (_B1, _B2, _G3)), (_B1, _B2, _G3),
)
# TR-BDF2 as an ESDIRK (Hosea & Shampine): a trapezoidal stage to t0 + gamma h, then BDF2; L-stable, order 2
_GT = 2 - math.sqrt(2.0)
_DT = _GT / 2
_WT = math.sqrt(2.0) / 4
TRBDF2 = Implicit("trbdf2", 2, (0.0, _GT, 1.0), ((0.0, 0.0, 0.0), (_DT, _DT, 0.0), (_WT, _WT, _DT)), (_WT, _WT, _DT))

IMPLICIT = {t.name: t for t in (IMPLICIT_EULER, RADAU, GAUSS_LEGENDRE4, GAUSS_LEGENDRE6, SDIRK2, SDIRK3, TRBDF2)}
IMPLICIT["gauss_legendre"] = GAUSS_LEGENDRE4
IMPLICIT["sdirk"] = SDIRK3
