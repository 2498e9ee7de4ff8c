"""WebShop product catalogs: a generated one (offline, deterministic) and a loader for WebShop's own product files.

Generated catalog (:func:`generate_catalog`)
    Products are drawn from 50 product types in 10 categories (fashion, shoes, beauty, electronics, grocery,
    furniture, kitchen, sports, pets, office). Product ``i`` is built from its own random stream
    (``random.Random("webshop:{seed}:{i}")``) and its type is ``types[i % 50]`` in a seed-shuffled type order, so a
    catalog of ``n`` products is the first ``n`` of any larger one with the same seed (WebShop's ``num_products``
    also takes a prefix). Each product has an ASIN-like id (``B0`` + 8 characters), a title (brand, type, two of
    its attributes, a descriptor), the category path, a description, bullet points (one per attribute, in WebShop's
    "HEAD: text" style), 0–5 reviews and a rating, attributes, options (colour, size, flavour, scent… with 2–6 values
    each), a price or a price range, and the price actually charged (drawn inside the range, as WebShop does).

    Two rules keep WebShop's reward honest on generated text:

    - a product's attributes are exactly the type attributes that occur in its title, bullet points or
      description (WebShop also credits an attribute found in those texts);
    - an option value is dropped from a product when its colour-normalised form occurs in those texts (WebShop
      credits a purchased option found there, whatever the goal asked).

    The option pools are chosen so that no two values of one option type fuzzy-match (token-set ratio ≤ 85) or
    normalise to the same colour — otherwise buying the wrong one would score as right.

WebShop files (:func:`load_webshop_catalog`)
    ``items_shuffle_1000.json`` / ``items_shuffle.json`` (a list of products with ``asin``, ``name``, ``category``,
    ``query``, ``product_category``, ``small_description``, ``full_description``, ``pricing``,
    ``customization_options``, optional ``Attributes``), with, next to it when present, ``items_ins_v2_1000.json`` /
    ``items_ins_v2.json`` (``{asin: {attributes, instruction, instruction_attributes}}``), ``items_human_ins.json``
    (``{asin: [{instruction, instruction_attributes, instruction_options}]}``) and ``reviews.json``
    (``[{asin, reviews: [{title, stars|score, review|body}], average_rating}]``). Processing follows WebShop's
    ``load_products``: the first ``num_products`` entries, ASINs ``nan`` or longer than 10 characters and duplicates
    skipped, option names and values lower-cased with ``/`` → ``" | "``, prices parsed from the ``$`` string
    (missing → $100.0), ``DUMMY_ATTR`` when a product has no attributes.

Catalogs are cached per configuration (:func:`get_catalog`).
"""

from __future__ import annotations

import functools
import json
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from ragen_plugins_envs.webshop.text import normalize_color

__all__ = [
    "CATEGORIES",
    "Catalog",
    "HumanInstruction",
    "PRODUCT_TYPES",
    "Product",
    "ProductType",
    "Review",
    "button_texts",
    "find_webshop_files",
    "generate_catalog",
    "get_catalog",
    "load_webshop_catalog",
    "parse_pricing",
]


# --------------------------------------------------------------------------------------------- data model

@dataclass(frozen=True)
class Review:
    """One review: ``title``, ``score`` (1–5 stars) and ``body``."""

    title: str
    score: int
    body: str


@dataclass(frozen=True)
class HumanInstruction:
    """A human-written WebShop instruction for one product (``items_human_ins.json``)."""

    instruction: str
    attributes: tuple[str, ...]
    options: tuple[str, ...]


@dataclass(frozen=True, eq=False)
class Product:
    """One product, with WebShop's fields (``Title``, ``Description``, ``BulletPoints``, ``Attributes``, ...).

    :ivar options: ``((option name, (value, ...)), ...)``, names and values lower-case, in page order.
    :ivar pricing: one price or a ``(low, high)`` range, as shown on the pages (``price_tag``).
    :ivar price: the price actually charged (inside the range), used by the reward.
    :ivar noun_phrase: generated products: how instructions name the product (e.g. ``men's dress shirt``).
    :ivar instruction_text / instruction_attributes: WebShop's synthetic instruction (``items_ins_v2``), if any.
    :ivar human_instructions: WebShop's human instructions (``items_human_ins.json``), if any.
    """

    asin: str
    title: str
    category: str
    query: str
    product_category: str
    product_type: str
    description: str
    bullet_points: tuple[str, ...]
    reviews: tuple[Review, ...]
    rating: str
    attributes: tuple[str, ...]
    options: tuple[tuple[str, tuple[str, ...]], ...]
    pricing: tuple[float, ...]
    price_tag: str
    price: float
    noun_phrase: str = ""
    instruction_text: str | None = None
    instruction_attributes: tuple[str, ...] = ()
    human_instructions: tuple[HumanInstruction, ...] = ()

    @functools.cached_property
    def options_dict(self) -> dict[str, tuple[str, ...]]:
        """Option name → values."""
        return dict(self.options)

    @functools.cached_property
    def text_lower(self) -> dict[str, str]:
        """Lower-cased title, bullet points (joined by spaces) and description, as the reward reads them."""
        return {"title": self.title.lower(), "bullets": " ".join(self.bullet_points).lower(),
                "description": self.description.lower()}

    def mentions(self, phrase: str) -> bool:
        """Whether ``phrase`` occurs in the lower-cased title, bullet points or description."""
        texts = self.text_lower
        return phrase in texts["title"] or phrase in texts["bullets"] or phrase in texts["description"]

    @functools.cached_property
    def search_document(self) -> str:
        """The text WebShop indexes: title, description, first bullet point and the options, lower-cased."""
        option_text = ", and ".join(f"{name}: {', '.join(values)}" for name, values in self.options)
        first_bullet = self.bullet_points[0] if self.bullet_points else ""
        return " ".join([self.title, self.description, first_bullet, option_text]).lower()


@dataclass(frozen=True, eq=False)
class Catalog:
    """An ordered, immutable set of products with an ASIN index.

    :ivar source: ``"generated"`` or the path of the WebShop product file.
    :ivar key: the cache key (source, num_products, seed).
    """

    products: tuple[Product, ...]
    source: str
    key: tuple[Any, ...]
    by_asin: Mapping[str, Product] = field(default_factory=dict)
    index_of: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_asin", {p.asin: p for p in self.products})
        object.__setattr__(self, "index_of", {p.asin: i for i, p in enumerate(self.products)})

    def __len__(self) -> int:
        return len(self.products)

    @property
    def categories(self) -> list[str]:
        """Sorted distinct categories."""
        return sorted({p.category for p in self.products})

    @property
    def is_generated(self) -> bool:
        return self.source == "generated"


# --------------------------------------------------------------------------------------------- vocabulary

@dataclass(frozen=True)
class ProductType:
    """A product type of the generated catalog.

    :ivar options: ``((option name, value pool, min values, max values), ...)``.
    :ivar words: title tails (descriptors) — they name no attribute and no option value.
    """

    key: str
    category: str
    path: str
    query: str
    noun: str
    goal_noun: str
    attributes: tuple[str, ...]
    options: tuple[tuple[str, tuple[str, ...], int, int], ...]
    price: tuple[float, float]
    words: tuple[str, ...]


APPAREL_COLORS = ("black", "white", "navy", "grey", "blue", "green", "beige", "brown", "pink", "purple", "khaki",
                  "olive", "burgundy", "charcoal", "ivory", "teal", "coral", "maroon", "mustard", "lavender", "red")
LIP_COLORS = ("red", "pink", "nude", "coral", "plum", "burgundy", "mauve", "wine", "rose", "peach")
DEVICE_COLORS = ("black", "white", "silver", "blue", "red", "green", "pink", "purple", "gold", "grey")
WOOD_COLORS = ("black", "white", "walnut", "espresso", "grey", "natural", "oak", "cherry")
FABRIC_COLORS = ("black", "grey", "navy", "beige", "green", "pink", "blue", "ivory", "mustard", "teal")
GEAR_COLORS = ("black", "blue", "green", "orange", "purple", "pink", "grey", "teal", "red", "yellow")
SIZES_ALPHA = ("x-small", "small", "medium", "large", "x-large", "xx-large", "3x-large")
SIZES_WOMEN = ("0", "2", "4", "6", "8", "10", "12", "14", "16")
SIZES_SHOE = ("6", "6.5", "7", "7.5", "8", "8.5", "9", "9.5", "10", "10.5", "11", "12")
SIZES_KIDS = ("11 little kid", "12 little kid", "13 little kid", "1 big kid", "2 big kid", "3 big kid")
SIZES_PET = ("small", "medium", "large", "x-large")
SCENTS = ("lavender", "vanilla", "eucalyptus", "unscented", "coconut", "rose", "jasmine", "cedarwood", "lemongrass",
          "peppermint", "ocean breeze", "green tea")
SNACK_FLAVORS = ("peanut butter", "chocolate", "vanilla", "strawberry", "blueberry", "cinnamon", "honey", "sea salt",
                 "maple", "original", "mixed berry", "coconut", "almond")
NUT_FLAVORS = ("sea salt", "honey roasted", "unsalted", "smoked", "cinnamon", "chili lime", "dark chocolate", "maple")
TEA_FLAVORS = ("jasmine", "mint", "lemon", "honey ginger", "original", "peach", "matcha", "ginseng")
ROASTS = ("medium roast", "dark roast", "french roast", "breakfast blend", "espresso roast", "house blend", "decaf")
DOG_FOOD_FLAVORS = ("chicken and rice", "lamb and rice", "salmon", "beef", "turkey", "duck")
LITTER_SCENTS = ("unscented", "lavender", "fresh scent", "baking soda", "cedarwood")
PATTERNS = ("floral", "striped", "plaid", "geometric", "polka dot", "paisley", "tie dye", "camo", "leopard", "marble")
CAPACITIES = ("16gb", "32gb", "64gb", "128gb", "256gb")
QUANTITIES = ("1", "2", "3", "4", "6", "8", "10", "12")


def _t(key: str, category: str, path: str, query: str, noun: str, attributes: str,
       options: Sequence[tuple[str, tuple[str, ...], int, int]], price: tuple[float, float], words: str,
       goal_noun: str | None = None) -> ProductType:
    return ProductType(key=key, category=category, path=path, query=query, noun=noun,
                       goal_noun=goal_noun or noun.lower(), attributes=tuple(attributes.split("|")),
                       options=tuple(options), price=price, words=tuple(words.split("|")))


_CSJ = "Clothing, Shoes & Jewelry"
_BPC = "Beauty & Personal Care"
_GGF = "Grocery & Gourmet Food"
_HK = "Home & Kitchen"

#: the 50 product types of the generated catalog
PRODUCT_TYPES: tuple[ProductType, ...] = (
    # ------------------------------------------------------------------ fashion
    _t("dress_shirt", "fashion", f"{_CSJ} › Men › Clothing › Shirts › Dress Shirts", "men's dress shirts",
       "Men's Dress Shirt",
       "machine wash|slim fit|wrinkle free|long sleeve|button closure|cotton spandex|classic fit|easy care",
       [("color", APPAREL_COLORS, 3, 6), ("size", SIZES_ALPHA, 3, 6)], (18, 60),
       "Business Casual Shirt|Formal Office Shirt|Button Down Shirt|Work Shirt"),
    _t("womens_jeans", "fashion", f"{_CSJ} › Women › Clothing › Jeans", "women's jeans", "Women's Jeans",
       "high waist|stretch denim|skinny leg|machine wash|butt lifting|ripped knee|straight leg|zipper fly",
       [("color", APPAREL_COLORS, 2, 5), ("size", SIZES_WOMEN, 3, 7)], (22, 70),
       "Denim Pants|Jean Pants|Everyday Jeans|Casual Denim"),
    _t("womens_dress", "fashion", f"{_CSJ} › Women › Clothing › Dresses", "women's dresses", "Women's Dress",
       "short sleeve|v neck|a-line silhouette|hand wash|knee length|flowy hem|side pockets|smocked waist",
       [("color", APPAREL_COLORS, 3, 6), ("size", SIZES_ALPHA, 3, 6)], (20, 65),
       "Summer Casual Dress|Swing Dress|Midi Dress|Sundress"),
    _t("mens_hoodie", "fashion", f"{_CSJ} › Men › Clothing › Active › Active Hoodies", "men's hoodies",
       "Men's Hoodie",
       "fleece lined|kangaroo pocket|drawstring hood|machine wash|relaxed fit|ribbed cuffs|full zip|heavyweight cotton",
       [("color", APPAREL_COLORS, 3, 6), ("size", SIZES_ALPHA, 3, 6)], (20, 55),
       "Pullover Sweatshirt|Hooded Sweatshirt|Athletic Hoodie|Casual Sweatshirt"),
    _t("womens_leggings", "fashion", f"{_CSJ} › Women › Clothing › Active › Leggings", "women's leggings",
       "Women's Leggings",
       "high waist|tummy control|squat proof|moisture wicking|four way stretch|hidden pocket|buttery soft"
       "|opaque fabric",
       [("color", APPAREL_COLORS, 3, 6), ("size", SIZES_ALPHA, 3, 6)], (12, 40),
       "Yoga Pants|Workout Pants|Athletic Tights|Gym Leggings"),
    # ------------------------------------------------------------------ shoes
    _t("running_shoes", "shoes", f"{_CSJ} › Men › Shoes › Athletic › Running", "men's running shoes",
       "Men's Running Shoes",
       "breathable mesh|rubber sole|lace up|arch support|non slip|memory foam|shock absorbing|knit upper",
       [("color", APPAREL_COLORS, 2, 5), ("size", SIZES_SHOE, 4, 8)], (35, 120),
       "Athletic Sneakers|Tennis Shoes|Walking Shoes|Gym Trainers"),
    _t("womens_sandals", "shoes", f"{_CSJ} › Women › Shoes › Sandals", "women's sandals", "Women's Sandals",
       "open toe|ankle strap|flat heel|arch support|non slip|buckle closure|cushioned footbed|vegan leather",
       [("color", APPAREL_COLORS, 2, 5), ("size", SIZES_SHOE, 4, 8)], (18, 60),
       "Summer Slides|Beach Sandals|Casual Flats|Strappy Sandals"),
    _t("ankle_boots", "shoes", f"{_CSJ} › Women › Shoes › Boots › Ankle & Bootie", "women's ankle boots",
       "Women's Ankle Boots",
       "side zipper|chunky heel|faux fur lining|water resistant|pointed toe|rubber sole|block heel|suede finish",
       [("color", APPAREL_COLORS, 2, 5), ("size", SIZES_SHOE, 4, 8)], (30, 95),
       "Booties|Chelsea Boots|Winter Booties|Dress Booties"),
    _t("mens_slippers", "shoes", f"{_CSJ} › Men › Shoes › Slippers", "men's slippers", "Men's Slippers",
       "memory foam|indoor outdoor|non slip|plush lining|slip on|machine washable|rubber sole|wide width",
       [("color", APPAREL_COLORS, 2, 5), ("size", SIZES_SHOE, 4, 8)], (15, 45),
       "House Shoes|Moccasin Slippers|Bedroom Slippers|Cozy Scuffs"),
    _t("kids_sneakers", "shoes", f"{_CSJ} › Boys › Shoes › Sneakers", "kids sneakers", "Kids Sneakers",
       "hook and loop|light up|non slip|breathable mesh|easy on|flexible sole|cushioned insole|reflective trim",
       [("color", GEAR_COLORS, 2, 5), ("size", SIZES_KIDS, 3, 6)], (20, 55),
       "School Shoes|Running Shoes|Play Sneakers|Athletic Shoes"),
    # ------------------------------------------------------------------ beauty
    _t("face_moisturizer", "beauty",
       f"{_BPC} › Skin Care › Face › Creams & Moisturizers › Face Moisturizers", "face moisturizer",
       "Face Moisturizer",
       "hyaluronic acid|fragrance free|oil free|sensitive skin|non comedogenic|dermatologist tested|cruelty free"
       "|paraben free",
       [("size", ("0.5 fl oz", "1.7 fl oz", "2.5 fl oz", "3.4 fl oz"), 2, 3)], (12, 48),
       "Daily Face Cream|Hydrating Lotion|Facial Cream|Day Cream"),
    _t("shampoo", "beauty", f"{_BPC} › Hair Care › Shampoo & Conditioner › Shampoos", "shampoo", "Shampoo",
       "sulfate free|color safe|natural ingredients|paraben free|dandruff control|tea tree oil|volumizing formula"
       "|salon quality",
       [("scent", SCENTS, 2, 5), ("size", ("8 fl oz", "16 fl oz", "32 fl oz"), 2, 3)], (8, 32),
       "Hair Cleanser|Daily Shampoo|Hair Wash|Clarifying Shampoo"),
    _t("lipstick", "beauty", f"{_BPC} › Makeup › Lips › Lipstick", "lipstick", "Lipstick",
       "long lasting|matte finish|cruelty free|highly pigmented|transfer proof|vegan formula|shea butter"
       "|smudge proof",
       [("color", LIP_COLORS, 3, 6)], (6, 28),
       "Lip Color|Liquid Lipstick|Lip Stain|Lipstick Set"),
    _t("hair_dryer", "beauty", f"{_BPC} › Hair Care › Styling Tools & Appliances › Hair Dryers", "hair dryer",
       "Hair Dryer",
       "ionic technology|diffuser attachment|cool shot button|fast drying|low noise|foldable handle"
       "|ceramic tourmaline|travel friendly",
       [("color", DEVICE_COLORS, 2, 4)], (25, 90),
       "Blow Dryer|Hair Blower|Styling Dryer|Salon Dryer"),
    _t("body_wash", "beauty", f"{_BPC} › Skin Care › Body › Cleansers › Body Washes", "body wash", "Body Wash",
       "natural ingredients|sulfate free|moisturizing formula|sensitive skin|paraben free|plant based"
       "|gentle cleansing|dermatologist tested",
       [("scent", SCENTS, 2, 5), ("size", ("12 fl oz", "16 fl oz", "24 fl oz"), 2, 3)], (7, 25),
       "Shower Gel|Body Cleanser|Bath Gel|Shower Wash"),
    # ------------------------------------------------------------------ electronics
    _t("wireless_earbuds", "electronics",
       "Electronics › Headphones, Earbuds & Accessories › Headphones & Earbuds › Earbud Headphones",
       "wireless earbuds", "Wireless Earbuds",
       "noise cancelling|water resistant|charging case|touch control|built in microphone|long battery life"
       "|deep bass|ergonomic fit",
       [("color", DEVICE_COLORS, 2, 5)], (20, 130),
       "Bluetooth Headphones|In Ear Headphones|Earphones|Sport Earbuds"),
    _t("phone_case", "electronics", "Cell Phones & Accessories › Cases, Holsters & Sleeves › Basic Cases",
       "phone case", "Phone Case",
       "shockproof bumper|wireless charging compatible|raised edges|slim profile|anti scratch|built in kickstand"
       "|drop protection|screen protector included",
       [("color", DEVICE_COLORS, 2, 5), ("pattern name", PATTERNS, 2, 4)], (8, 30),
       "Protective Cover|Phone Cover|Bumper Case|Clear Case"),
    _t("flash_drive", "electronics",
       "Electronics › Computers & Accessories › Data Storage › USB Flash Drives", "usb flash drive",
       "USB Flash Drive",
       "high speed transfer|metal casing|keychain loop|plug and play|compact design|password protection"
       "|shock resistant|dual connector",
       [("capacity", CAPACITIES, 3, 5), ("color", DEVICE_COLORS, 2, 4)], (6, 45),
       "Thumb Drive|Memory Stick|Jump Drive|Pen Drive"),
    _t("bluetooth_speaker", "electronics", "Electronics › Portable Audio & Video › Portable Speakers & Docks",
       "bluetooth speaker", "Bluetooth Speaker",
       "waterproof design|deep bass|long battery life|built in microphone|stereo pairing|rugged build"
       "|hands free calling|loud sound",
       [("color", DEVICE_COLORS, 2, 5)], (20, 110),
       "Portable Speaker|Wireless Speaker|Outdoor Speaker|Party Speaker"),
    _t("smart_watch", "electronics", "Electronics › Wearable Technology › Smartwatches", "smart watch",
       "Smart Watch",
       "heart rate monitor|sleep tracking|water resistant|step counter|blood oxygen|touch screen|long battery life"
       "|message notifications",
       [("color", DEVICE_COLORS, 2, 5), ("size", ("38mm", "41mm", "45mm"), 2, 3)], (30, 200),
       "Fitness Tracker|Activity Tracker|Sports Watch|Fitness Watch"),
    # ------------------------------------------------------------------ grocery
    _t("protein_bars", "grocery", f"{_GGF} › Snack Foods › Bars › Protein Bars", "protein bars", "Protein Bars",
       "gluten free|high protein|low sugar|non gmo|plant based|keto friendly|dairy free|soy free",
       [("flavor name", SNACK_FLAVORS, 3, 6), ("size", ("6 count", "12 count", "24 count"), 2, 3)], (10, 40),
       "Snack Bars|Energy Bars|Nutrition Bars|Meal Bars"),
    _t("ground_coffee", "grocery", f"{_GGF} › Beverages › Coffee, Tea & Cocoa › Coffee › Ground Coffee",
       "ground coffee", "Ground Coffee",
       "fair trade|usda organic|single origin|small batch|low acid|kosher certified|shade grown|arabica beans",
       [("flavor name", ROASTS, 3, 5), ("size", ("12 ounce", "24 ounce", "32 ounce"), 2, 3)], (9, 35),
       "Coffee Grounds|Roasted Coffee|Drip Coffee|Coffee Bag"),
    _t("green_tea", "grocery", f"{_GGF} › Beverages › Coffee, Tea & Cocoa › Tea › Green", "green tea",
       "Green Tea",
       "usda organic|non gmo|individually wrapped|kosher certified|sugar free|antioxidant rich|gluten free"
       "|whole leaf",
       [("flavor name", TEA_FLAVORS, 3, 5), ("size", ("20 count", "40 count", "100 count"), 2, 3)], (6, 25),
       "Tea Bags|Herbal Tea|Loose Tea|Tea Sachets"),
    _t("mixed_nuts", "grocery", f"{_GGF} › Snack Foods › Nuts & Seeds › Mixed Nuts", "mixed nuts", "Mixed Nuts",
       "lightly salted|non gmo|gluten free|resealable bag|kosher certified|vegan friendly|no added sugar"
       "|keto friendly",
       [("flavor name", NUT_FLAVORS, 3, 5), ("size", ("8 ounce", "16 ounce", "40 ounce"), 2, 3)], (8, 30),
       "Nut Mix|Snack Nuts|Deluxe Nuts|Party Nuts"),
    _t("olive_oil", "grocery", f"{_GGF} › Pantry Staples › Cooking & Baking › Oils, Vinegars & Sprays › Olive",
       "olive oil", "Extra Virgin Olive Oil",
       "cold pressed|usda organic|non gmo|single origin|kosher certified|glass bottle|rich in polyphenols"
       "|first harvest",
       [("size", ("16.9 fl oz", "25.4 fl oz", "33.8 fl oz", "50.7 fl oz"), 2, 4)], (10, 45),
       "Cooking Oil|Salad Oil|Finishing Oil|Kitchen Oil"),
    # ------------------------------------------------------------------ furniture
    _t("office_chair", "furniture",
       f"{_HK} › Furniture › Home Office Furniture › Home Office Chairs › Home Office Desk Chairs", "office chair",
       "Office Chair",
       "lumbar support|adjustable height|swivel base|breathable mesh|padded armrests|easy assembly|heavy duty"
       "|ergonomic design",
       [("color", FABRIC_COLORS, 2, 5)], (60, 250),
       "Desk Chair|Computer Chair|Task Chair|Executive Chair"),
    _t("bookshelf", "furniture", f"{_HK} › Furniture › Living Room Furniture › Bookcases", "bookshelf",
       "Bookshelf",
       "easy assembly|open shelves|engineered wood|anti tip hardware|space saving|metal frame|industrial style"
       "|adjustable shelves",
       [("color", WOOD_COLORS, 2, 5)], (45, 200),
       "Bookcase|Storage Shelf|Display Shelf|Shelving Unit"),
    _t("nightstand", "furniture", f"{_HK} › Furniture › Bedroom Furniture › Nightstands", "nightstand",
       "Nightstand",
       "storage drawer|easy assembly|solid wood legs|open shelf|charging station|compact design|mid century"
       "|soft close",
       [("color", WOOD_COLORS, 2, 5), ("item package quantity", ("1", "2"), 2, 2)], (35, 160),
       "Bedside Table|End Table|Side Table|Night Table"),
    _t("accent_chair", "furniture", f"{_HK} › Furniture › Living Room Furniture › Chairs", "accent chair",
       "Accent Chair",
       "tufted back|solid wood legs|easy assembly|padded seat|velvet upholstery|mid century|high density foam"
       "|wide seat",
       [("color", FABRIC_COLORS, 2, 5)], (80, 300),
       "Armchair|Lounge Chair|Reading Chair|Club Chair"),
    _t("tv_stand", "furniture",
       f"{_HK} › Furniture › Living Room Furniture › Television Stands & Entertainment Centers",
       "tv stand", "TV Stand",
       "cable management|storage cabinet|easy assembly|engineered wood|open shelves|glass doors|farmhouse style"
       "|sliding barn door",
       [("color", WOOD_COLORS, 2, 5), ("size", ("55 inch", "65 inch", "75 inch"), 2, 3)], (70, 280),
       "Entertainment Center|Media Console|Television Stand|Media Cabinet"),
    # ------------------------------------------------------------------ kitchen
    _t("frying_pan", "kitchen", f"{_HK} › Kitchen & Dining › Cookware › Pots & Pans › Skillets", "frying pan",
       "Frying Pan",
       "dishwasher safe|oven safe|induction compatible|stay cool handle|pfoa free|heavy gauge|even heating"
       "|scratch resistant",
       [("size", ("8 inch", "10 inch", "12 inch"), 2, 3), ("color", DEVICE_COLORS, 2, 4)], (18, 80),
       "Nonstick Skillet|Omelette Pan|Saute Pan|Cooking Pan"),
    _t("water_bottle", "kitchen", f"{_HK} › Kitchen & Dining › Storage & Organization › Travel & To-Go Drinkware",
       "water bottle", "Water Bottle",
       "vacuum insulated|leak proof|bpa free|double wall|wide mouth|dishwasher safe|sweat proof|straw lid",
       [("color", GEAR_COLORS, 3, 6), ("size", ("18 oz", "24 oz", "32 oz", "40 oz"), 2, 4)], (12, 45),
       "Insulated Bottle|Sports Bottle|Travel Bottle|Hydration Bottle"),
    _t("knife_set", "kitchen", f"{_HK} › Kitchen & Dining › Kitchen Utensils & Gadgets › Knives & Accessories",
       "kitchen knife set", "Kitchen Knife Set",
       "high carbon|full tang|ergonomic handle|dishwasher safe|knife block|razor sharp|rust resistant"
       "|german steel",
       [("size", ("6 piece", "8 piece", "14 piece", "20 piece"), 2, 4), ("color", ("black", "silver", "white"), 2, 3)],
       (25, 150), "Chef Knife Set|Cutlery Set|Kitchen Cutlery|Kitchen Knives"),
    _t("coffee_maker", "kitchen", f"{_HK} › Kitchen & Dining › Coffee, Tea & Espresso › Coffee Makers", "coffee maker",
       "Coffee Maker",
       "programmable timer|auto shut off|glass carafe|keep warm|brew strength control|reusable filter"
       "|thermal carafe|drip stop",
       [("color", ("black", "white", "silver", "red"), 2, 3)], (25, 140),
       "Drip Coffee Machine|Coffee Brewer|Coffee Machine|Brewing Station"),
    _t("cutting_board", "kitchen", f"{_HK} › Kitchen & Dining › Kitchen Utensils & Gadgets › Cutting Boards",
       "cutting board", "Cutting Board",
       "juice groove|non slip|dishwasher safe|reversible design|knife friendly|bpa free|easy grip handles"
       "|odor resistant",
       [("size", ("small", "medium", "large"), 2, 3),
        ("material type", ("bamboo", "acrylic", "walnut", "plastic"), 2, 3)],
       (10, 45), "Chopping Board|Carving Board|Prep Board|Serving Board"),
    # ------------------------------------------------------------------ sports
    _t("yoga_mat", "sports", "Sports & Outdoors › Exercise & Fitness › Yoga › Mats", "yoga mat", "Yoga Mat",
       "non slip|extra thick|eco friendly|carrying strap|tear resistant|sweat resistant|alignment lines|latex free",
       [("color", GEAR_COLORS, 3, 6), ("size", ("6mm", "8mm", "10mm"), 2, 3)], (15, 70),
       "Exercise Mat|Workout Mat|Pilates Mat|Fitness Mat"),
    _t("dumbbells", "sports", "Sports & Outdoors › Exercise & Fitness › Strength Training Equipment › Dumbbells",
       "dumbbells", "Dumbbells",
       "neoprene coating|non slip grip|hexagon shape|rust resistant|easy storage|chrome handle|rubber encased"
       "|anti roll",
       [("size", ("5 pound", "10 pound", "15 pound", "20 pound", "25 pound"), 3, 5),
        ("item package quantity", ("1", "2"), 2, 2)], (15, 120),
       "Hand Weights|Free Weights|Exercise Weights|Dumbbell Set"),
    _t("camping_tent", "sports", "Sports & Outdoors › Outdoor Recreation › Camping & Hiking › Tents & Shelters › Tents",
       "camping tent", "Camping Tent",
       "waterproof rainfly|easy setup|mesh windows|carry bag|instant pop up|double layer|freestanding design"
       "|storage pockets",
       [("size", ("2 person", "4 person", "6 person", "8 person"), 2, 4), ("color", GEAR_COLORS, 2, 4)], (40, 260),
       "Dome Tent|Backpacking Tent|Family Tent|Cabin Tent"),
    _t("resistance_bands", "sports", "Sports & Outdoors › Exercise & Fitness › Accessories › Exercise Bands",
       "resistance bands", "Resistance Bands",
       "latex free|door anchor|carry bag|non slip handles|ankle straps|exercise guide|heavy duty|stackable design",
       [("color", GEAR_COLORS, 2, 4), ("item package quantity", QUANTITIES[:5], 2, 4)], (10, 40),
       "Exercise Bands|Workout Bands|Fitness Bands|Stretch Bands"),
    _t("bike_helmet", "sports", "Sports & Outdoors › Outdoor Recreation › Cycling › Helmets", "bike helmet",
       "Bike Helmet",
       "adjustable fit|removable visor|ventilation channels|led taillight|impact resistant|detachable padding"
       "|cpsc certified|magnetic buckle",
       [("color", GEAR_COLORS, 2, 5), ("size", SIZES_ALPHA[1:5], 2, 4)], (25, 110),
       "Cycling Helmet|Bicycle Helmet|Road Helmet|Commuter Helmet"),
    # ------------------------------------------------------------------ pets
    _t("dog_bed", "pets", "Pet Supplies › Dogs › Beds & Furniture › Beds", "dog bed", "Dog Bed",
       "orthopedic foam|removable cover|non slip bottom|waterproof liner|bolster design|machine washable"
       "|calming donut|raised rim",
       [("color", FABRIC_COLORS, 2, 5), ("size", SIZES_PET, 2, 4)], (20, 110),
       "Pet Bed|Dog Couch|Pet Sofa|Dog Cushion"),
    _t("cat_litter", "pets", "Pet Supplies › Cats › Litter & Housebreaking › Litter", "cat litter", "Cat Litter",
       "clumping formula|odor control|low dust|lightweight formula|flushable|multi cat|easy scooping|plant based",
       [("scent", LITTER_SCENTS, 2, 4), ("size", ("10 pound", "20 pound", "40 pound"), 2, 3)], (10, 40),
       "Clumping Litter|Kitty Litter|Litter Box Filler|Cat Sand"),
    _t("dog_toy", "pets", "Pet Supplies › Dogs › Toys › Chew Toys", "dog chew toy", "Dog Chew Toy",
       "durable rubber|squeaky sound|non toxic|aggressive chewers|teeth cleaning|floating design|interactive play"
       "|treat dispensing",
       [("color", GEAR_COLORS, 2, 5), ("size", SIZES_PET, 2, 4)], (8, 30),
       "Chew Toy|Fetch Toy|Puppy Toy|Dog Toy"),
    _t("dog_food", "pets", "Pet Supplies › Dogs › Food › Dry", "dry dog food", "Dry Dog Food",
       "grain free|high protein|no artificial preservatives|natural ingredients|made in usa|omega fatty acids"
       "|real meat first|probiotics added",
       [("flavor name", DOG_FOOD_FLAVORS, 2, 4), ("size", ("5 pound", "15 pound", "30 pound"), 2, 3)], (15, 80),
       "Dog Kibble|Adult Dog Food|Puppy Food|Dog Food"),
    _t("pet_brush", "pets", "Pet Supplies › Dogs › Grooming › Brushes", "pet grooming brush", "Pet Grooming Brush",
       "self cleaning|ergonomic handle|deshedding tool|stainless pins|long hair|short hair|massage comb"
       "|gentle bristles",
       [("color", GEAR_COLORS, 2, 4)], (8, 30),
       "Slicker Brush|Dog Brush|Cat Brush|Shedding Brush"),
    # ------------------------------------------------------------------ office
    _t("gel_pens", "office", "Office Products › Office & School Supplies › Writing & Correction Supplies › Pens",
       "gel pens", "Gel Pens",
       "quick drying|smooth writing|retractable design|fine point|smudge free|acid free|comfort grip|refillable ink",
       [("color", ("black", "blue", "red", "green", "purple", "pink"), 2, 5),
        ("item package quantity", ("12", "24", "36"), 2, 3)],
       (6, 25), "Rollerball Pens|Writing Pens|Ink Pens|Pen Set"),
    _t("notebook", "office", "Office Products › Office & School Supplies › Paper › Notebooks & Writing Pads",
       "spiral notebook", "Spiral Notebook",
       "college ruled|perforated pages|thick paper|twin wire|pocket folder|hardcover|bleed proof|lay flat",
       [("color", APPAREL_COLORS[:12], 2, 5), ("item package quantity", ("1", "3", "5"), 2, 3)], (5, 25),
       "Subject Notebook|Journal|Notepad|School Notebook"),
    _t("desk_organizer", "office",
       "Office Products › Office & School Supplies › Desk Accessories & Workspace Organizers",
       "desk organizer", "Desk Organizer",
       "mesh design|multiple compartments|sliding drawer|easy assembly|space saving|non slip feet|pen holder"
       "|stackable trays",
       [("color", ("black", "white", "silver", "pink", "gold", "blue"), 2, 4)], (12, 45),
       "Office Organizer|Desktop Caddy|Supply Holder|Desk Caddy"),
    _t("laptop_stand", "office", "Office Products › Office Electronics › Computer Accessories › Laptop Stands",
       "laptop stand", "Laptop Stand",
       "adjustable height|aluminum alloy|foldable design|heat dissipation|non slip pads|ergonomic angle"
       "|portable design|cable management",
       [("color", ("black", "silver", "grey", "gold", "pink"), 2, 4)], (15, 60),
       "Laptop Riser|Notebook Stand|Computer Stand|Laptop Holder"),
    _t("file_folders", "office", "Office Products › Office & School Supplies › Filing Products › File Folders",
       "file folders", "File Folders",
       "letter size|reinforced tab|heavy duty|assorted colors|acid free|recycled material|expanding pockets"
       "|durable cardstock",
       [("color", ("blue", "green", "red", "yellow", "purple", "orange", "black"), 2, 5),
        ("item package quantity", ("12", "24", "50", "100"), 2, 4)], (8, 35),
       "Manila Folders|Filing Folders|Document Folders|Office Folders"),
)

#: category → (display name, benefit phrases, extra bullets, description openers, description closers)
_CATEGORY_TEXT: dict[str, tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "fashion": (
        "Fashion",
        ("keeps you comfortable from morning meetings to weekend outings",
         "a thoughtful detail that looks sharp and feels easy all day long",
         "holds its shape through regular wear and many washes",
         "made with quality fabric that moves with you",
         "a versatile piece that pairs with almost anything in your closet",
         "gives a flattering look without sacrificing comfort"),
        ("QUALITY FABRIC: soft, breathable material that feels good against the skin",
         "VERSATILE STYLE: easy to dress up or down for work, travel or a night out",
         "GIFT IDEA: a thoughtful gift for family and friends"),
        ("is a wardrobe staple built for everyday comfort.", "brings a clean, modern look to any outfit.",
         "is designed for people who want style and comfort in one piece."),
        ("Please check the size chart before ordering.", "Wash with similar tones before the first wear.",
         "Backed by our friendly customer service team."),
    ),
    "shoes": (
        "Shoes",
        ("keeps every step comfortable from morning to night",
         "adds stability and support for long days on your feet",
         "a practical detail for walking, errands and travel",
         "helps your feet stay comfortable in every season",
         "made to go the distance without breaking in",
         "gives a secure and comfortable fit"),
        ("EVERYDAY WEAR: great for walking, commuting, travel and casual outings",
         "COMFORT FIRST: a cushioned feel that keeps your feet happy",
         "EASY CARE: wipe clean with a damp cloth"),
        ("are made for all-day comfort and support.", "combine a modern look with a comfortable fit.",
         "are built for people who are always on the move."),
        ("Please check the sizing guide before ordering.", "Ships in a protective box.",
         "Contact us with any fit questions."),
    ),
    "beauty": (
        "Beauty & Personal Care",
        ("gentle enough for everyday use", "part of a simple daily routine that gives visible results",
         "leaves you feeling fresh and pampered", "a formula made with care for you and the planet",
         "works for all types and tones", "delivers a salon experience at home"),
        ("EASY TO USE: apply as part of your daily routine",
         "TRAVEL FRIENDLY PACKAGING: easy to pack for trips and the gym",
         "SATISFACTION PROMISE: contact us if you are not happy with your purchase"),
        ("is made to keep your daily routine simple and effective.",
         "brings a little luxury to your everyday routine.",
         "is crafted with care and quality in mind."),
        ("For external use only.", "Store in a cool, dry place.", "Discontinue use if irritation occurs."),
    ),
    "electronics": (
        "Electronics",
        ("designed for everyday use at home, at work and on the go",
         "gives you a dependable experience day after day",
         "a practical feature you will use every day",
         "built for performance and reliability",
         "makes your devices easier and more enjoyable to use",
         "built to keep up with a busy lifestyle"),
        ("WIDE COMPATIBILITY: works with most popular devices",
         "WHAT YOU GET: the device, a user manual and our friendly customer service",
         "WORRY FREE: contact our support team with any questions"),
        ("delivers dependable performance for everyday life.", "is made to make your day easier.",
         "combines a sleek look with practical features."),
        ("Please read the manual before first use.", "Keep away from open flames.",
         "Our support team is happy to help."),
    ),
    "grocery": (
        "Grocery & Gourmet Food",
        ("a wholesome choice for the whole family", "made with simple ingredients you can feel good about",
         "tastes great at home, at work or on the go", "a smart addition to your pantry",
         "carefully sourced and packed for freshness", "a delicious choice for everyday enjoyment"),
        ("GREAT TASTE: a satisfying flavor you will want to enjoy again and again",
         "PANTRY STAPLE: stock up and always have some on hand",
         "FAMILY FAVORITE: loved by kids and grown-ups alike"),
        ("is made for people who care about what they eat.", "brings great taste to your daily routine.",
         "is a pantry favorite with simple, quality ingredients."),
        ("Store in a cool, dry place.", "Best enjoyed fresh after opening.",
         "Packed in a facility that also processes tree nuts."),
    ),
    "furniture": (
        "Furniture",
        ("fits easily into bedrooms, living rooms and home offices",
         "built to look good and last for years", "adds function and style to any space",
         "a practical detail that makes everyday life easier", "made to handle daily use with ease",
         "complements a wide range of decor styles"),
        ("SIMPLE SETUP: all hardware and instructions included",
         "SPACE FRIENDLY: a footprint that suits apartments and homes",
         "CUSTOMER CARE: our team is here to help with any questions"),
        ("brings comfort and function to your home.", "is designed to make your space more organized.",
         "combines a timeless look with everyday practicality."),
        ("Assembly required.", "Wipe clean with a soft cloth.", "Please measure your space before ordering."),
    ),
    "kitchen": (
        "Home & Kitchen",
        ("makes everyday cooking easier and more enjoyable",
         "a practical detail for busy kitchens", "built for daily use at home",
         "helps you prepare meals with confidence", "designed with home cooks in mind",
         "keeps cleanup quick and simple"),
        ("GREAT GIFT: a thoughtful gift for weddings, housewarmings and holidays",
         "EVERYDAY ESSENTIAL: a kitchen tool you will reach for again and again",
         "CUSTOMER CARE: contact us with any questions about your order"),
        ("is a kitchen essential for everyday meals.", "makes meal prep simple and enjoyable.",
         "is designed for home cooks who value quality."),
        ("Hand washing extends the life of the product.", "Please read the care guide before use.",
         "Backed by our customer care team."),
    ),
    "sports": (
        "Sports & Outdoors",
        ("helps you get the most out of every workout", "built for training at home, at the gym or outdoors",
         "gives you confidence during every session", "made for beginners and experienced athletes alike",
         "keeps you focused on your goals", "a practical detail for an active lifestyle"),
        ("TRAIN ANYWHERE: great for home workouts, the gym and travel",
         "ACTIVE LIFESTYLE: a great gift for fitness lovers",
         "CUSTOMER CARE: our team is here to help with any questions"),
        ("is made for people who love to stay active.", "helps you train harder and recover better.",
         "is built for the gym, the trail and everything in between."),
        ("Consult a professional before starting a new exercise program.", "Store indoors when not in use.",
         "Contact us with any questions."),
    ),
    "pets": (
        "Pet Supplies",
        ("keeps your pet happy and comfortable", "a practical detail for busy pet parents",
         "made with your furry friend in mind", "helps keep your home clean and fresh",
         "designed for pets of all ages", "makes daily pet care easier"),
        ("HAPPY PETS: loved by cats and dogs alike",
         "PET PARENT APPROVED: a thoughtful gift for pet lovers",
         "CUSTOMER CARE: contact us with any questions about your order"),
        ("is made to keep your pet happy and healthy.", "makes caring for your pet simple.",
         "is designed for pets and the people who love them."),
        ("Supervise your pet during use.", "Keep out of reach of children.", "Contact us with any questions."),
    ),
    "office": (
        "Office Products",
        ("keeps your workspace neat and productive", "a practical detail for school, home and the office",
         "helps you stay organized every day", "made for students, teachers and professionals",
         "designed for everyday use at your desk", "makes work and study a little easier"),
        ("PRODUCTIVE WORKSPACE: a tidy desk helps you focus",
         "GREAT FOR SCHOOL: perfect for students and teachers",
         "CUSTOMER CARE: contact us with any questions about your order"),
        ("keeps your desk organized and your work on track.", "is an everyday essential for work and school.",
         "is designed to make your workday more productive."),
        ("Keep away from moisture.", "Suitable for home, school and office.", "Contact us with any questions."),
    ),
}

#: category keys of the generated catalog
CATEGORIES: tuple[str, ...] = tuple(_CATEGORY_TEXT)

_ATTRIBUTE_SENTENCES = (
    "This {noun} is {attrs}.", "Key features: {attrs}.", "You will love that it is {attrs}.",
    "Highlights include {attrs}.",
)
_REVIEW_TITLES = {
    5: ("Love it", "Exactly what I wanted", "Excellent quality", "Highly recommend", "Five stars"),
    4: ("Very good", "Great value", "Works well", "Happy with it", "Nice quality"),
    3: ("It is okay", "Decent for the price", "Mixed feelings", "Average"),
    2: ("Not great", "Could be better", "Disappointed"),
    1: ("Not what I expected", "Would not buy again", "Poor quality"),
}
_REVIEW_BODIES = {
    5: ("This {noun} is exactly as described and the quality is excellent.",
        "I bought this {noun} as a gift and it was a big hit.", "Great {noun}, I would buy it again."),
    4: ("Good {noun} for the money, just as pictured.", "The {noun} works well, shipping was quick.",
        "Solid {noun}, only a minor issue with the packaging."),
    3: ("The {noun} is fine but nothing special.", "It does the job, though I expected a bit more."),
    2: ("The {noun} did not meet my expectations.", "Quality is lower than I hoped."),
    1: ("The {noun} arrived damaged and support was slow.", "Returned it, not worth the price."),
}
_REVIEW_SCORES = (5, 5, 5, 4, 4, 4, 3, 2, 1)
_BRAND_HEADS = ("ka", "vo", "lu", "mi", "ze", "no", "qu", "bel", "dor", "fin", "gra", "hex", "jor", "lin", "mar",
                "nex", "pol", "ser", "tur", "vin", "wex", "yor", "zen", "cal", "dex", "fel", "kor", "lum", "mox",
                "nor", "pex", "qin", "sol", "tov", "ul", "vex", "xan", "yel", "zor", "bro")
_BRAND_TAILS = ("ra", "vo", "lix", "ton", "za", "mo", "ni", "rex", "sa", "ly", "ko", "via", "do", "ra", "te",
                "lo", "ga", "nix", "vy", "po", "zo", "ka", "lia", "mi")
_BUTTON_TEXTS = frozenset({"back to search", "< prev", "next >", "description", "features", "reviews", "buy now",
                           "attributes", "search"})
_ASIN_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def _title_case(phrase: str) -> str:
    return " ".join(w[:1].upper() + w[1:] for w in phrase.split(" "))


def _join_and(items: Sequence[str]) -> str:
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


@functools.cache
def _forbidden_in_brand(ptype: ProductType) -> tuple[str, ...]:
    """Attribute phrases and normalised option values a brand name must not contain."""
    bad = set(ptype.attributes)
    for _name, pool, _lo, _hi in ptype.options:
        bad.update(normalize_color(v) for v in pool)
    return tuple(sorted(bad))


def _brand(rng: random.Random, ptype: ProductType) -> str:
    forbidden = _forbidden_in_brand(ptype)
    while True:
        name = rng.choice(_BRAND_HEADS) + rng.choice(_BRAND_TAILS)
        if rng.random() < 0.35:
            name += rng.choice(_BRAND_TAILS)
        if not any(bad in name for bad in forbidden):
            return name.upper() if rng.random() < 0.25 else name.capitalize()


def _money(value: float) -> float:
    return float(Decimal(str(value)).quantize(Decimal("0.01")))


def _generate_product(ptype: ProductType, seed: int, index: int, taken: set[str]) -> Product:
    rng = random.Random(f"webshop:{seed}:{index}")
    _display, benefits, extra_bullets, openers, closers = _CATEGORY_TEXT[ptype.category]
    while True:
        asin = "B0" + "".join(rng.choice(_ASIN_CHARS) for _ in range(8))
        if asin not in taken:
            taken.add(asin)
            break
    brand = _brand(rng, ptype)
    chosen = rng.sample(ptype.attributes, rng.randint(3, 5))
    noun_lower = ptype.goal_noun
    title = f"{brand} {ptype.noun} {' '.join(_title_case(a) for a in chosen[:2])} {rng.choice(ptype.words)}"
    bullets = [f"{a.upper()}: {rng.choice(benefits)}" for a in chosen]
    bullets += rng.sample(extra_bullets, rng.randint(1, 2))
    sentence = rng.choice(_ATTRIBUTE_SENTENCES).format(noun=noun_lower, attrs=_join_and(chosen))
    description = f"{brand} {noun_lower} {rng.choice(openers)} {sentence} {rng.choice(closers)}"
    text = " ".join([title, " ".join(bullets), description]).lower()
    attributes = tuple(a for a in ptype.attributes if a in text)

    options: list[tuple[str, tuple[str, ...]]] = []
    for name, pool, lo, hi in ptype.options:
        picked = set(rng.sample(pool, rng.randint(lo, min(hi, len(pool)))))
        values = tuple(v for v in pool if v in picked and normalize_color(v) not in text)
        if len(values) >= 2:
            options.append((name, values))

    low, high = ptype.price
    base = _money(rng.uniform(low, high))
    if rng.random() < 0.25:
        top = _money(base * rng.uniform(1.1, 1.6))
        pricing: tuple[float, ...] = (base, top)
        price_tag = f"${base} to ${top}"
        price = _money(rng.uniform(base, top))
    else:
        pricing, price_tag, price = (base,), f"${base}", base

    reviews = []
    for _ in range(rng.choice((0, 1, 2, 2, 3, 3, 4, 5))):
        score = rng.choice(_REVIEW_SCORES)
        reviews.append(Review(title=rng.choice(_REVIEW_TITLES[score]), score=score,
                              body=rng.choice(_REVIEW_BODIES[score]).format(noun=noun_lower)))
    rating = f"{sum(r.score for r in reviews) / len(reviews):.1f}" if reviews else "N.A."
    return Product(
        asin=asin, title=title, category=ptype.category, query=ptype.query, product_category=ptype.path,
        product_type=ptype.key, description=description, bullet_points=tuple(bullets), reviews=tuple(reviews),
        rating=rating, attributes=attributes, options=tuple(options), pricing=pricing, price_tag=price_tag,
        price=price, noun_phrase=noun_lower,
    )


@functools.lru_cache(maxsize=16)
def generate_catalog(num_products: int = 1000, seed: int = 0) -> Catalog:
    """The generated catalog of ``num_products`` products (cached; see the module docstring)."""
    if isinstance(num_products, bool) or not isinstance(num_products, int) or num_products < 1:
        raise ValueError(f"num_products must be a positive integer, got {num_products!r}")
    order = list(PRODUCT_TYPES)
    random.Random(f"webshop-types:{seed}").shuffle(order)
    taken: set[str] = set()
    products = tuple(_generate_product(order[i % len(order)], seed, i, taken) for i in range(num_products))
    return Catalog(products=products, source="generated", key=("generated", num_products, seed))


# --------------------------------------------------------------------------------------------- WebShop files

_PRODUCT_FILES = ("items_shuffle_1000.json", "items_shuffle.json")
_ATTRIBUTE_FILES = ("items_ins_v2_1000.json", "items_ins_v2.json")
_HUMAN_FILES = ("items_human_ins.json",)
_REVIEW_FILES = ("reviews.json", "items_reviews.json")


def find_webshop_files(path: str | Path) -> dict[str, Path | None]:
    """Locate WebShop's data files: ``path`` is the product file or the folder holding it.

    Returns ``{"products", "attributes", "human", "reviews"}`` → path or None (products is never None).

    :raises FileNotFoundError: no product file there.
    """
    root = Path(path).expanduser()
    if root.is_dir():
        product_file = next((root / n for n in _PRODUCT_FILES if (root / n).is_file()), None)
        folder = root
    else:
        product_file = root if root.is_file() else None
        folder = root.parent
    if product_file is None:
        raise FileNotFoundError(
            f"no WebShop product file at {str(root)!r} (expected a JSON file, or a folder holding one of "
            f"{', '.join(_PRODUCT_FILES)})")

    def first(names: Sequence[str]) -> Path | None:
        return next((folder / n for n in names if (folder / n).is_file()), None)

    return {"products": product_file, "attributes": first(_ATTRIBUTE_FILES), "human": first(_HUMAN_FILES),
            "reviews": first(_REVIEW_FILES)}


def parse_pricing(value: Any) -> tuple[tuple[float, ...], str]:
    """WebShop's price parsing: ``"$12.99"`` → ``((12.99,), "$12.99")``; ``"$10.71 - $18.34"`` → a range.

    A list of numbers is accepted too; anything missing or unparsable is WebShop's default ``$100.0``.
    """
    prices: list[float] = []
    if isinstance(value, str):
        for chunk in value.split("$")[1:]:
            digits = re.sub(r"[^\d.]", "", chunk)
            try:
                prices.append(float(Decimal(digits)))
            except (InvalidOperation, ValueError):
                continue
    elif isinstance(value, (list, tuple)):
        for item in value:
            if isinstance(item, (int, float)) and not isinstance(item, bool):
                prices.append(float(item))
    prices = [p for p in prices if p == p and p not in (float("inf"), float("-inf"))]
    if not prices:
        return (100.0,), "$100.0"
    if len(prices) == 1:
        return (prices[0],), f"${prices[0]}"
    return (prices[0], prices[1]), f"${prices[0]} to ${prices[1]}"


def _read_json(path: Path | None) -> Any:
    if path is None:
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else ("" if value is None else str(value))


def _str_tuple(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)):
        return tuple(str(v) for v in value if v is not None)
    return ()


def _parse_reviews(raw: Any) -> tuple[Review, ...]:
    out = []
    for r in raw if isinstance(raw, list) else []:
        if not isinstance(r, dict):
            continue
        score = r.get("score", r.get("stars", 0))
        try:
            score_int = int(float(score))  # type: ignore[arg-type]  # None and junk are caught below
        except (TypeError, ValueError):
            score_int = 0
        out.append(Review(title=_as_text(r.get("title")), score=max(0, min(5, score_int)),
                          body=_as_text(r.get("body", r.get("review", "")))))
    return tuple(out)


@functools.lru_cache(maxsize=8)
def load_webshop_catalog(path: str, num_products: int | None = None, seed: int = 0) -> Catalog:
    """Load WebShop's product files (see the module docstring); ``seed`` fixes the prices drawn in ranges.

    :raises FileNotFoundError: no product file at ``path``.
    :raises ValueError: the file is not a list of products, or no product survives.
    """
    files = find_webshop_files(path)
    raw_products = _read_json(files["products"])
    if not isinstance(raw_products, list):
        raise ValueError(f"{files['products']}: expected a JSON list of products")
    attributes = _read_json(files["attributes"]) or {}
    human = _read_json(files["human"]) or {}
    review_data = _read_review_data(files["reviews"])
    if num_products is not None:
        raw_products = raw_products[:num_products]
    rng = random.Random(f"webshop-prices:{seed}")
    products: list[Product] = []
    seen: set[str] = set()
    for p in raw_products:
        if not isinstance(p, dict):
            continue
        asin = _as_text(p.get("asin"))
        if not asin or asin == "nan" or len(asin) > 10 or asin in seen:
            continue
        seen.add(asin)
        products.append(_parse_product(p, asin, rng, attributes, human, review_data))
    if not products:
        raise ValueError(f"{files['products']}: no usable product")
    return Catalog(products=tuple(products), source=str(files["products"]),
                   key=(str(files["products"]), num_products, seed))


def _read_review_data(path: Path | None) -> dict[str, tuple[tuple[Review, ...], str]]:
    """The reviews file's reviews and average rating (``"N.A."`` when absent) by ASIN."""
    review_data: dict[str, tuple[tuple[Review, ...], str]] = {}
    for entry in _read_json(path) or []:
        if isinstance(entry, dict) and "asin" in entry:
            rating = entry.get("average_rating", "N.A.")
            review_data[str(entry["asin"])] = (_parse_reviews(entry.get("reviews")), str(rating))
    return review_data


def _parse_product(p: dict[str, Any], asin: str, rng: random.Random, attributes: Any, human: Any,
                   review_data: dict[str, tuple[tuple[Review, ...], str]]) -> Product:
    """One product of WebShop's product file (``asin`` already checked), with its attributes, human instructions
    and reviews from the other files; a price range draws the price from ``rng``."""
    pricing, price_tag = parse_pricing(p.get("pricing"))
    price = pricing[0] if len(pricing) == 1 else rng.uniform(pricing[0], pricing[1])
    attr_entry = attributes.get(asin) if isinstance(attributes, dict) else None
    attr_entry = attr_entry if isinstance(attr_entry, dict) else {}
    product_attrs = _str_tuple(p.get("Attributes") or p.get("attributes") or attr_entry.get("attributes"))
    humans = []
    for ins in human.get(asin, []) if isinstance(human, dict) else []:
        if isinstance(ins, dict) and ins.get("instruction"):
            humans.append(HumanInstruction(instruction=_as_text(ins["instruction"]),
                                           attributes=_str_tuple(ins.get("instruction_attributes")),
                                           options=_str_tuple(ins.get("instruction_options"))))
    reviews, rating = review_data.get(asin, (_parse_reviews(p.get("reviews")), "N.A."))
    bullets = p.get("small_description")
    query = _as_text(p.get("query")).lower().strip()
    return Product(
        asin=asin, title=_as_text(p.get("name") or p.get("Title")), category=_as_text(p.get("category")),
        query=query, product_category=_as_text(p.get("product_category")), product_type=query,
        description=_as_text(p.get("full_description") or p.get("Description")),
        bullet_points=_str_tuple(bullets) if bullets else (), reviews=reviews, rating=rating,
        attributes=product_attrs or ("DUMMY_ATTR",), options=_parse_options(p.get("customization_options") or {}),
        pricing=pricing, price_tag=price_tag, price=float(price),
        instruction_text=attr_entry.get("instruction") if isinstance(attr_entry.get("instruction"), str) else None,
        instruction_attributes=_str_tuple(attr_entry.get("instruction_attributes")),
        human_instructions=tuple(humans),
    )


def _parse_options(custom: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """A product's ``customization_options`` as ``(name, values)`` pairs, lower-cased (``/`` in a value becomes
    `` | ``); names without values are left out."""
    options: list[tuple[str, tuple[str, ...]]] = []
    if isinstance(custom, dict):
        for name, contents in custom.items():
            if not contents or not isinstance(contents, list):
                continue
            values = []
            for content in contents:
                raw_value = content.get("value") if isinstance(content, dict) else content
                if raw_value is None:
                    continue
                values.append(str(raw_value).strip().replace("/", " | ").lower())
            if values:
                options.append((str(name).lower(), tuple(values)))
    return tuple(options)


def get_catalog(source: str = "generated", num_products: int | None = 1000, seed: int = 0) -> Catalog:
    """The catalog of a configuration: ``"generated"`` or a path to WebShop's files (cached either way)."""
    if source == "generated":
        return generate_catalog(1000 if num_products is None else num_products, seed)
    return load_webshop_catalog(str(Path(source).expanduser().resolve()), num_products, seed)


def button_texts() -> frozenset[str]:
    """Lower-cased texts of WebShop's buttons (option values equal to one would be shadowed)."""
    return _BUTTON_TEXTS
