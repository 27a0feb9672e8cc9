"""Write the built pages of tasks/filter-cases/pages/: a shop listing, a data table, a
forum thread and a long form, each large enough (over 300 AXTree lines) to need a
filter. Deterministic: the same files every run.

    python benchmarks/make_filter_pages.py [--out tasks/filter-cases/pages]
"""

from __future__ import annotations

import argparse
import html
import random
from pathlib import Path

PRODUCTS = [
    ("Stainless Steel Electric Kettle 1.7L",
     "Boils a full jug in under four minutes, auto shut-off.", 34.99),
    ("Glass Stovetop Tea Kettle", "Borosilicate glass, whistles when ready.", 27.50),
    ("Cast Iron Skillet 12 inch", "Pre-seasoned heavy pan for searing and frying.", 39.00),
    ("Nonstick Frying Pan 10 inch", "Ceramic coating, oven safe to 200 C.", 24.90),
    ("Chef Knife 8 inch", "German steel blade, full tang handle.", 59.00),
    ("Bamboo Cutting Board Set", "Three boards with juice grooves.", 22.00),
    ("Digital Kitchen Scale", "Weighs up to 5 kg in 1 g steps.", 18.75),
    ("Pour-Over Coffee Dripper", "Ceramic cone, size 02 filters.", 16.00),
    ("Burr Coffee Grinder", "Forty grind settings from espresso to French press.", 89.00),
    ("French Press 1L", "Double-wall stainless carafe keeps coffee hot.", 32.00),
    ("Espresso Machine Compact", "15 bar pump with steam wand.", 199.00),
    ("Milk Frother Handheld", "Battery powered whisk for lattes.", 12.99),
    ("Stand Mixer 5 Quart", "Tilt head, ten speeds, dough hook included.", 249.00),
    ("Hand Blender with Whisk", "Immersion blender, 600 W.", 44.00),
    ("Food Processor 8 Cup", "Slicing and shredding discs.", 119.00),
    ("Toaster 4 Slice", "Wide slots, bagel and defrost settings.", 49.99),
    ("Rice Cooker 6 Cup", "Keeps warm for 12 hours, steaming basket.", 54.00),
    ("Slow Cooker 6 Quart", "Programmable timer, ceramic pot.", 64.00),
    ("Pressure Cooker 8 Quart", "Seven functions in one pot.", 99.00),
    ("Air Fryer 5.8 Quart", "Crisps without oil, eight presets.", 89.99),
    ("Waffle Maker Belgian", "Deep pockets, nonstick plates.", 39.99),
    ("Dutch Oven Enameled 5.5 Quart", "Cast iron with enamel, braises and bakes bread.", 79.00),
    ("Sheet Pan Set of 2", "Aluminium half sheets, rolled edges.", 21.00),
    ("Silicone Baking Mats", "Reusable liners for cookies.", 14.00),
    ("Measuring Cups and Spoons", "Stainless, engraved markings.", 19.00),
    ("Mixing Bowl Set", "Five nesting bowls with lids.", 29.00),
    ("Salad Spinner", "Pump action, brake button.", 26.00),
    ("Vegetable Peeler Y-Shape", "Swivel blade for potatoes and carrots.", 7.99),
    ("Garlic Press", "Rocker press, dishwasher safe.", 11.00),
    ("Can Opener Smooth Edge", "Opens lids without sharp rims.", 15.50),
    ("Water Filter Pitcher", "Ten cup jug, filter included.", 31.00),
    ("Insulated Water Bottle", "Keeps drinks cold for 24 hours.", 25.00),
    ("Lunch Box Bento", "Three compartments, leakproof.", 17.00),
    ("Spice Rack Rotating", "Twenty jars with labels.", 36.00),
    ("Knife Sharpener Two Stage", "Coarse and fine slots.", 13.50),
    ("Oven Mitts Pair", "Heat resistant to 250 C.", 12.00),
    ("Dish Drying Rack", "Two tier with utensil holder.", 33.00),
    ("Trash Can Step 30L", "Soft close lid, odour seal.", 58.00),
    ("Paper Towel Holder", "Weighted base, one-hand tear.", 16.50),
    ("Apron Cotton", "Adjustable neck strap, two pockets.", 14.99),
]

PEOPLE = [
    "Maria Gonzalez", "James Smith", "Wei Chen", "Fatima Khan", "Liam O'Brien", "Yuki Tanaka",
    "Olga Petrova", "Ahmed Hassan", "Sofia Rossi", "Noah Williams", "Aisha Bello",
    "Lucas Martin", "Emma Johansson", "Raj Patel", "Chloe Dubois", "Mateo Silva",
    "Hannah Muller", "Ivan Horvat", "Zara Ahmed", "Ben Carter", "Priya Nair", "Tom Novak",
    "Lena Fischer", "Omar Farouk", "Grace Lee", "Diego Ramirez", "Anna Kowalska",
    "Samuel Okafor", "Mia Andersen", "Ethan Brown", "Nora Berg", "Kenji Sato",
    "Laura Costa", "Felix Wagner", "Amara Diallo", "Jonas Nilsson", "Elif Yilmaz",
    "Pablo Torres", "Ruth Cohen", "Victor Hugo Lima",
]
DEPARTMENTS = ["Engineering", "Finance", "Marketing", "Sales", "Legal", "Support", "Research"]
CITIES = ["Lisbon", "Oslo", "Toronto", "Nairobi", "Osaka", "Denver", "Krakow", "Lyon"]

FORUM_USERS = ["kettle_fan", "bread_baker", "sourdough_sam", "crumb_queen", "yeastmaster",
               "flour_power", "oven_owl", "proofing_pat", "hydration_hal", "crust_critic"]
FORUM_TOPICS = [
    "My starter smells like nail polish remover, is it dead?",
    "Feed it twice a day at room temperature for a week and the smell goes away.",
    "Acetone smell means it is hungry, not dead. Try a 1:5:5 feeding ratio.",
    "I had the same problem in winter; a warmer spot on top of the fridge fixed it.",
    "Whole rye flour in the feed makes it much more active.",
    "Do you use chlorinated tap water? Let it stand overnight first.",
    "Discard more before each feeding, keep only a tablespoon.",
    "Mine doubled in four hours after switching to filtered water.",
    "You can also dry some starter on parchment as a backup.",
    "Bake with it when it passes the float test, not before.",
]

FORM_SECTIONS = [
    ("Personal details", ["First name", "Middle name", "Last name", "Date of birth",
                          "Nationality", "Passport number", "Email address", "Phone number"]),
    ("Home address", ["Street and number", "Apartment or suite", "City", "State or province",
                      "Postal code", "Country"]),
    ("Current employment", ["Employer name", "Job title", "Start date", "Monthly income",
                            "Supervisor name", "Supervisor phone"]),
    ("Education", ["Highest degree", "Institution", "Field of study", "Graduation year"]),
    ("Emergency contact", ["Contact full name", "Relationship", "Contact phone",
                           "Contact email"]),
    ("Bank details", ["Account holder", "IBAN", "BIC or SWIFT code", "Bank name"]),
]


def page(title: str, body: str) -> str:
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>{html.escape(title)}</title></head><body>{body}</body></html>\n")


def site_header(site: str) -> str:
    links = "".join(f"<li><a href='#{s.lower()}'>{s}</a></li>" for s in (
        "Home", "Deals", "New arrivals", "Gift cards", "Help", "Account"))
    return (f"<header><a href='#'>{site}</a><nav aria-label='Main'><ul>{links}</ul></nav>"
            "<form role='search'><input type='search' aria-label='Search the site'>"
            "<button>Search</button></form></header>")


def site_footer() -> str:
    cols = []
    for heading in ("About us", "Customer service", "Legal"):
        items = "".join(f"<li><a href='#'>{heading} link {i}</a></li>" for i in range(1, 6))
        cols.append(f"<section><h3>{heading}</h3><ul>{items}</ul></section>")
    return f"<footer>{''.join(cols)}<p>Copyright 2024</p></footer>"


def shop() -> str:
    brands = ["Acme", "Northwind", "Globex", "Initech", "Umbrella", "Hooli"]
    sidebar = "<aside aria-label='Filters'><h2>Filter results</h2><fieldset><legend>Brand</legend>"
    sidebar += "".join(f"<label><input type='checkbox'> {b}</label>" for b in brands)
    sidebar += ("</fieldset><fieldset><legend>Price</legend><label>Min price "
                "<input type='number'></label><label>Max price <input type='number'></label>"
                "</fieldset><fieldset><legend>Customer rating</legend>")
    sidebar += "".join(f"<label><input type='radio' name='r'> {n} stars and up</label>"
                       for n in (4, 3, 2))
    sidebar += "</fieldset><button>Apply filters</button></aside>"
    items = []
    rng = random.Random(7)
    for index, (name, blurb, price) in enumerate(PRODUCTS):
        brand = brands[index % len(brands)]
        reviews = rng.randint(3, 900)
        stars = rng.choice(["3.9", "4.1", "4.4", "4.6", "4.8"])
        items.append(
            f"<article><h3><a href='#p{index}'>{name}</a></h3><p>by {brand}</p>"
            f"<p>{html.escape(blurb)}</p><p>${price:.2f}</p>"
            f"<p>Rated {stars} out of 5 ({reviews} reviews)</p>"
            "<button>Add to cart</button><button>Save for later</button></article>"
        )
    sort = ("<label>Sort by <select><option>Featured</option><option>Price: low to high"
            "</option><option>Price: high to low</option><option>Newest</option></select>"
            "</label>")
    pages = "".join(f"<a href='#page{i}'>{i}</a> " for i in range(1, 6))
    body = (site_header("Kitchen Goods Store")
            + "<main><h1>Kitchen and dining</h1><p>Showing 1-40 of 212 results</p>" + sort
            + sidebar + "<section aria-label='Products'>" + "".join(items) + "</section>"
            + f"<nav aria-label='Pagination'>{pages}<a href='#next'>Next page</a></nav></main>"
            + site_footer())
    return page("Kitchen and dining - Kitchen Goods Store", body)


def table() -> str:
    rng = random.Random(11)
    rows = []
    for index, person in enumerate(PEOPLE * 2):
        if index >= 60:
            break
        suffix = "" if index < len(PEOPLE) else " Jr."
        dept = DEPARTMENTS[index % len(DEPARTMENTS)]
        city = CITIES[(index * 3) % len(CITIES)]
        salary = 42000 + rng.randint(0, 90) * 1000
        rows.append(
            f"<tr><td>{1000 + index}</td><td>{html.escape(person + suffix)}</td><td>{dept}</td>"
            f"<td>{city}</td><td>${salary:,}</td><td>2019-0{1 + index % 9}-1{index % 10}</td>"
            f"<td><a href='#edit{index}'>Edit</a> <button>Delete</button></td></tr>"
        )
    head = "".join(f"<th><button>{c}</button></th>" for c in (
        "ID", "Name", "Department", "Office", "Salary", "Hired")) + "<th>Actions</th>"
    filters = ("<form aria-label='Filter staff'><label>Name contains <input></label>"
               "<label>Department <select><option>All</option>"
               + "".join(f"<option>{d}</option>" for d in DEPARTMENTS)
               + "</select></label><button>Filter</button><button type='reset'>Clear"
               "</button></form>")
    pages = "".join(f"<a href='#page{i}'>{i}</a> " for i in range(1, 8))
    body = (site_header("People Directory") + "<main><h1>Staff records</h1>" + filters
            + "<p><button>Export CSV</button> <button>Add employee</button></p>"
            + f"<table><caption>Employees</caption><thead><tr>{head}</tr></thead><tbody>"
            + "".join(rows) + "</tbody></table>"
            + f"<nav aria-label='Pages'><a href='#prev'>Previous</a> {pages}"
            "<a href='#next'>Next</a></nav></main>" + site_footer())
    return page("Staff records - People Directory", body)


def forum() -> str:
    posts = []
    for index in range(30):
        user = FORUM_USERS[index % len(FORUM_USERS)]
        text = FORUM_TOPICS[index % len(FORUM_TOPICS)]
        posts.append(
            f"<article aria-label='Post {index + 1}'><header><a href='#u{user}'>{user}</a>"
            f"<span> posted on 2024-03-{1 + index % 28:02d}</span><span> #{index + 1}</span>"
            f"</header><p>{html.escape(text)}</p><p>Edited once.</p>"
            "<footer><button>Reply</button><button>Quote</button><button>Like</button>"
            "<button>Report</button></footer></article>"
        )
    reply = ("<section><h2>Post a reply</h2><form><label>Your message <textarea></textarea>"
             "</label><label><input type='checkbox'> Notify me of new replies</label>"
             "<button>Preview</button><button>Post reply</button></form></section>")
    crumbs = ("<nav aria-label='Breadcrumb'><a href='#'>Forums</a> › <a href='#'>Baking</a> "
              "› <a href='#'>Sourdough</a></nav>")
    pages = "".join(f"<a href='#page{i}'>{i}</a> " for i in range(1, 5))
    body = (site_header("Bakers' Forum") + "<main>" + crumbs
            + "<h1>Starter smells like acetone - help!</h1><p><button>Subscribe to thread"
            "</button> <button>Mark as solved</button></p>" + "".join(posts)
            + f"<nav aria-label='Thread pages'>{pages}<a href='#next'>Next</a></nav>" + reply
            + "</main>" + site_footer())
    return page("Starter smells like acetone - Bakers' Forum", body)


def form() -> str:
    parts = []
    for legend, fields in FORM_SECTIONS:
        inputs = "".join(f"<p><label>{f} <input name='{f.lower().replace(' ', '_')}'></label>"
                         f"<small>Required.</small></p>" for f in fields)
        parts.append(f"<fieldset><legend>{legend}</legend>{inputs}</fieldset>")
    choices = "".join(f"<label><input type='checkbox'> {c}</label>" for c in (
        "Email newsletters", "Text message alerts", "Postal mail", "Phone calls"))
    consent = ("<fieldset><legend>Declarations</legend><label><input type='checkbox'> I confirm "
               "the information above is accurate</label><label><input type='checkbox'> I "
               "accept the terms and conditions</label><label><input type='checkbox'> I "
               "agree to the privacy policy</label></fieldset>")
    upload = ("<fieldset><legend>Documents</legend><label>Proof of identity <input "
              "type='file'></label><label>Proof of address <input type='file'></label>"
              "<label>Cover letter <textarea></textarea></label></fieldset>")
    body = (site_header("City Housing Office") + "<main><h1>Rental assistance application"
            "</h1><p>Fields marked required must be filled in.</p><form>" + "".join(parts)
            + f"<fieldset><legend>Contact preferences</legend>{choices}</fieldset>"
            + upload + consent
            + "<button type='button'>Save draft</button><button>Submit application</button>"
            "</form></main>" + site_footer())
    return page("Rental assistance application - City Housing Office", body)


PAGES = {"shop.html": shop, "table.html": table, "forum.html": forum, "form.html": form}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("tasks/filter-cases/pages"))
    out = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    for name, build in PAGES.items():
        (out / name).write_text(build(), encoding="utf-8")
        print(out / name)


if __name__ == "__main__":
    main()
