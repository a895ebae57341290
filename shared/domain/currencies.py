"""The currencies an order or a product may be priced in: ISO 4217's List One as published by
SIX (the maintenance agency), the codes in circulation only. Left out: the codes that are not
money one pays with (XXX "no currency", XTS "testing", the precious metals XAU, XAG, XPD and
XPT, the bond-market units XBA to XBD, XDR and XSU, XUA) and the funds codes (BOV, CHE, CHW,
CLF, COU, MXV, USN, UYI, UYW). A code withdrawn from List One (HRK, ZWL, ...) goes when SIX
withdraws it."""

from __future__ import annotations

ISO_4217 = frozenset(
    """
    AED AFN ALL AMD AOA ARS AUD AWG AZN BAM BBD BDT BHD BIF BMD BND BOB BRL BSD BTN BWP BYN
    BZD CAD CDF CHF CLP CNY COP CRC CUP CVE CZK DJF DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP
    GEL GHS GIP GMD GNF GTQ GYD HKD HNL HTG HUF IDR ILS INR IQD IRR ISK JMD JOD JPY KES KGS
    KHR KMF KPW KRW KWD KYD KZT LAK LBP LKR LRD LSL LYD MAD MDL MGA MKD MMK MNT MOP MRU MUR
    MVR MWK MXN MYR MZN NAD NGN NIO NOK NPR NZD OMR PAB PEN PGK PHP PKR PLN PYG QAR RON RSD
    RUB RWF SAR SBD SCR SDG SEK SGD SHP SLE SOS SRD SSP STN SVC SYP SZL THB TJS TMT TND TOP
    TRY TTD TWD TZS UAH UGX USD UYU UZS VED VES VND VUV WST XAF XCD XCG XOF XPF YER ZAR ZMW
    ZWG
    """.split()  # noqa: SIM905 (a table to read, not a list to edit)
)
